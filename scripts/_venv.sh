# Sourced by scripts/test.sh and scripts/demo.sh (run from the repository root): the project's
# virtual environment, $GGLSPEEDUP_VENV (default .venv), created with ${PYTHON:-python3} on first
# use, and gglspeedup installed into it editable with the extras named by the argument.
# --no-compile: pip byte-compiles every .py file it installs (18,400 here, 48 s of CPU of its
# ~100 s on 2 cores, most of them never imported by the tests or demos); without it Python
# writes a module's .pyc the first time a process imports it, into the same venv, and later
# processes load that.
#
#   install_venv "test,all"      # then "$VENV/bin/python" is the environment's interpreter

install_venv() {
    VENV=${GGLSPEEDUP_VENV:-.venv}
    if [ ! -x "$VENV/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile -c constraints.txt -e ".[$1]"
}
