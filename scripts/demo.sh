#!/usr/bin/env bash
# Set up (first run) and run the main job: GraphSAGE on the bundled Cora with the torch backend,
# on the best available device. Extra arguments go to `python -m gglspeedup.demo` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_venv "torch,demo"
exec "$VENV/bin/python" -m gglspeedup.demo "$@"
