#!/usr/bin/env bash
# Set up (first run) and run the main job: GraphSAGE on the bundled Cora with the torch backend,
# on the best available device. Extra arguments go to `python -m gglspeedup.demo` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GGLSPEEDUP_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[torch,demo]"
exec "$VENV/bin/python" -m gglspeedup.demo "$@"
