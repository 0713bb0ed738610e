#!/usr/bin/env bash
# Set up (first run) and run every check: ruff (lint and format), the normal suite with the
# package's doctests, then the GPU kernels on numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1). On a
# machine with a GPU the normal suite already runs the GPU cases on the real device. Extra pytest
# arguments are passed to both pytest runs. The service's Ray tests (tests/test_service_ray_*.py) run
# Ray inside a private network namespace they make themselves (tests/service_netns.py; root, or
# unprivileged user namespaces), so nothing listens on this machine's interfaces.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
install_venv "test,all,service"
echo "== ruff (lint, then format check; configuration in pyproject.toml)"
"$VENV/bin/python" -m ruff check .
"$VENV/bin/python" -m ruff format --check .
echo "== normal suite and doctests (CPU; GPU cases run here only on a GPU machine)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules gglspeedup tests "$@"
echo "== CUDA-simulator suite (GPU kernels on NUMBA_ENABLE_CUDASIM=1)"
NUMBA_ENABLE_CUDASIM=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -m cuda tests "$@"
