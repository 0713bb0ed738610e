# Sourced by scripts/test.sh and scripts/demo.sh (run from the repository root): the project's
# virtual environment, $GGLSPEEDUP_VENV (default .venv), created with ${PYTHON:-python3} on first
# use, and gglspeedup installed into it editable with the extras named by the argument.
#
#   install_venv "test,all"      # then "$VENV/bin/python" is the environment's interpreter
#   install_venv ""              # the package's own requirements only
#
# The packages are installed by uv (pinned in constraints.txt, itself installed by pip into the
# environment first): it unpacks and byte-compiles wheels on every core where pip uses one. On a
# fresh 2-core clone under one load (4.5-5.7), the package's own requirements took 20 s against
# pip's 38 and the test extras 64 s against 125 (79 against 105 s of CPU). The same versions come
# out (constraints.txt pins them; both environments' `pip freeze` compared). uv reads no pip
# configuration, so the indexes, find-links, constraints and certificate pip is configured with (its
# files and PIP_* variables, as `pip config list` shows them) are handed to it, with pip's rule of
# taking the best version across all indexes. GGLSPEEDUP_INSTALLER=pip installs with pip instead,
# as does a failed install of uv itself.

_uv_args() {  # UV_ARGS=(...): pip's configured sources as uv options
    UV_ARGS=(--index-strategy unsafe-best-match)
    local line key value item items
    while IFS= read -r line; do
        key=${line%%=*}
        key=${key#*.}
        value=${line#*=}
        value=${value#\'}
        value=${value%\'}
        # split on blanks only: an unquoted $value would also expand a glob character in a path
        read -ra items <<<"$value"
        for item in "${items[@]}"; do
            case $key in
                index-url) UV_ARGS+=(--index-url "$item") ;;
                extra-index-url) UV_ARGS+=(--extra-index-url "$item") ;;
                find-links) UV_ARGS+=(--find-links "$item") ;;
                constraint) UV_ARGS+=(--constraint "$item") ;;
                cert) export SSL_CERT_FILE=${SSL_CERT_FILE:-$item} ;;
            esac
        done
    done < <("$VENV/bin/python" -m pip config list 2>/dev/null)
}

install_venv() {
    VENV=${GGLSPEEDUP_VENV:-.venv}
    if [ ! -x "$VENV/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    local target=".${1:+[$1]}"
    if [ "${GGLSPEEDUP_INSTALLER:-uv}" = uv ] && { "$VENV/bin/python" -m uv --version >/dev/null 2>&1 \
        || "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt uv; }; then
        _uv_args
        "$VENV/bin/python" -m uv pip install -q --python "$VENV/bin/python" --compile-bytecode \
            "${UV_ARGS[@]}" -c constraints.txt -e "$target"
    else
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e "$target"
    fi
}
