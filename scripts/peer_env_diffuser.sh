#!/usr/bin/env bash
# Build the Diffuser peer environment (never part of CI, never a dependency of gglspeedup).
#
# Diffuser (github asFeng/Diffuser) runs on DGL. dgl 2.1.0 is the newest Linux wheel on the registry
# and carries native libraries for torch 2.0-2.2 only, so the peer gets its own venv:
#   dgl==2.1.0, torch==2.1.2, torchdata==0.7.1, setuptools<70, numpy<2, pandas (DGLBACKEND=pytorch),
# plus what gglspeedup needs to run beside it in the same process for the agreement checks and the
# bench: the numba gglspeedup pins (0.68.1, which still accepts numpy<2; 0.60 compiled our kernels about
# half as fast), a scipy that keeps numpy<2 and torch 2.1.2, tqdm, and TBB (a core dependency of gglspeedup
# on Linux x86-64: Numba's threading layer for our kernels there). matplotlib-free.
#
#   bash scripts/peer_env_diffuser.sh [PEER_DIR]        # default /work/peers/diffuser
#
# Diffuser's own source is not on a package registry: set DIFFUSER_SRC to a checkout (or a bare git
# directory) of it and the script exports its tree to PEER_DIR/Diffuser; the checks find it there
# (or through DIFFUSER_SRC at run time). Nothing of Diffuser is copied into this repository.
# Use it as:
#   DGLBACKEND=pytorch PYTHONPATH=$PWD PEER_DIR/venv/bin/python tools/diffuser_conformance.py
set -euo pipefail
PEER_DIR=${1:-/work/peers/diffuser}
PYTHON=${PYTHON:-python3.11}
mkdir -p "$PEER_DIR"
if [ ! -x "$PEER_DIR/venv/bin/python" ]; then
    "$PYTHON" -m venv "$PEER_DIR/venv"
fi
PIP=("$PEER_DIR/venv/bin/python" -m pip install --disable-pip-version-check)
# torch first and pinned, so nothing later can resolve another one.
"${PIP[@]}" "torch==2.1.2" "numpy<2" "setuptools<70"
"${PIP[@]}" "torch==2.1.2" "numpy<2" "setuptools<70" "dgl==2.1.0" "torchdata==0.7.1" pandas pyyaml pydantic \
    "numba==0.68.1" "scipy==1.13.1" "tbb==2023.2.0" tqdm pytest
if [ -n "${DIFFUSER_SRC:-}" ]; then
    rm -rf "$PEER_DIR/Diffuser" && mkdir -p "$PEER_DIR/Diffuser"
    if [ -d "$DIFFUSER_SRC/.git" ] || git -C "$DIFFUSER_SRC" rev-parse --git-dir >/dev/null 2>&1; then
        git --git-dir="$(git -C "$DIFFUSER_SRC" rev-parse --absolute-git-dir)" archive HEAD | tar -x -C "$PEER_DIR/Diffuser"
    else
        cp -r "$DIFFUSER_SRC"/. "$PEER_DIR/Diffuser/"
    fi
fi
DGLBACKEND=pytorch "$PEER_DIR/venv/bin/python" - <<'PY'
import dgl, numba, numpy, scipy, torch
print("torch", torch.__version__, "dgl", dgl.__version__, "numpy", numpy.__version__,
      "numba", numba.__version__, "scipy", scipy.__version__)
import ctypes, os, sys
ctypes.CDLL(os.path.join(sys.prefix, "lib", "libtbb.so.12"), mode=ctypes.RTLD_GLOBAL)  # as gglspeedup does
def total(n):
    t = 0
    for i in numba.prange(n):
        t += i
    return t
numba.njit(parallel=True)(total)(4)
print("numba threading layer:", numba.threading_layer())
g = dgl.graph(([0, 1], [1, 2]))
print("dgl ok:", g.num_edges(), "edges; formats", g.formats())
PY
