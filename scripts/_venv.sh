# Sourced by scripts/test.sh and scripts/demo.sh (run from the repository root): the project's
# virtual environment, $GGLSPEEDUP_VENV (default .venv), created with ${PYTHON:-python3} on first
# use, and gglspeedup installed into it editable with the extras named by the argument.
#
#   install_venv "test,all"      # then "$VENV/bin/python" is the environment's interpreter
#   install_venv ""              # the package's own requirements only

install_venv() {
    VENV=${GGLSPEEDUP_VENV:-.venv}
    if [ ! -x "$VENV/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".${1:+[$1]}"
}
