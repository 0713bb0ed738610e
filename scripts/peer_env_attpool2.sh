#!/usr/bin/env bash
# Build attpool2 (github silent567/attpool2) and its fused-lasso solver pygfl 1.0.2 in a venv of
# their own, as the peer of `python -m gglspeedup.bench attention-pooling` and of
# scripts/check_attpool2_my_test.sh. Never part of CI, never a dependency of gglspeedup.
#
# attpool2 has NO licence: it is run here, never copied into the project.
#
# Why by hand: pygfl 1.0.2's sdist on the registry is Python 2, lacks its C headers and links
# libgsl, so `pip install pygfl` fails. attpool2 only calls the Gaussian solver
# (pygfl.easy.solve_gfl -> graph_fused_lasso_warm), which lives in graph_fl.c + tf_dp.c and needs
# no GSL function: we compile those two files alone into libgraphfl.so, against tansey/gfl's
# headers of the 1.0.2 era (commit 00da7bb: the logit prototypes still take int counts, as
# 1.0.2's graph_fl.c does) and three one-line stub GSL headers that only name the gsl_rng type
# utils.h mentions. The Python half goes through 2to3, then the networkx-2 fixes: nx.subgraph()
# returns a read-only view (decompose_graph removes edges from it: .copy()), and degree views have
# no .items() (dict(...) first). The ctypes load is pointed at the package's own directory.
#
# Layout under $PEER_DIR (default /work/peers/attpool2):
#   src/attpool2/   attpool2's checkout (importable as the package `attpool2`: a .pth adds src/)
#   build/          pygfl's sdist, gfl's headers, the stub headers, libgraphfl.so
#   venv/           Python 3.11: torch==2.13.0 (CPU), numpy/scipy/numba/tbb/tqdm as in
#                   constraints.txt, networkx 2.8.8, the patched pygfl
# Sources: ATTPOOL2_GIT and GFL_GIT (git URLs or local git directories; the defaults fall back to
# the read-only mirrors under /work/.mirror when GitHub is unreachable).
# Takes about 3 minutes here (mostly the torch wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PEER_DIR=${PEER_DIR:-/work/peers/attpool2}
PYTHON=${PYTHON:-python3.11}
pick() {  # pick URL MIRROR: the mirror when it exists and the URL does not answer
    if [ -d "$2" ] && ! timeout 10 git ls-remote "$1" >/dev/null 2>&1; then echo "$2"; else echo "$1"; fi
}
ATTPOOL2_GIT=${ATTPOOL2_GIT:-$(pick https://github.com/silent567/attpool2 /work/.mirror/silent567+attpool2/repo/.git)}
GFL_GIT=${GFL_GIT:-$(pick https://github.com/tansey/gfl /work/.mirror/tansey+gfl/repo)}
GFL_HEADERS_COMMIT=00da7bb

mkdir -p "$PEER_DIR/src" "$PEER_DIR/build"
BUILD="$PEER_DIR/build"

# 1. attpool2 itself, at HEAD, imported as a package (its modules use relative imports)
rm -rf "$PEER_DIR/src/attpool2"
git clone --quiet "$ATTPOOL2_GIT" "$PEER_DIR/src/attpool2"
echo "attpool2 at $(git -C "$PEER_DIR/src/attpool2" rev-parse --short HEAD)"

# 2. the venv
[ -x "$PEER_DIR/venv/bin/python" ] || "$PYTHON" -m venv "$PEER_DIR/venv"
PY="$PEER_DIR/venv/bin/python"
PIP=("$PY" -m pip install --quiet --disable-pip-version-check -c "$ROOT/constraints.txt")
"${PIP[@]}" torch==2.13.0 numpy scipy numba tbb tqdm
"${PIP[@]}" networkx==2.8.8

# 3. pygfl 1.0.2: sources, headers, the solver library
rm -rf "$BUILD/pygfl-1.0.2" "$BUILD/gfl" "$BUILD/stub"
"$PY" -m pip download --quiet --no-deps --no-binary :all: pygfl==1.0.2 -d "$BUILD"
tar xzf "$BUILD/pygfl-1.0.2.tar.gz" -C "$BUILD"
mkdir -p "$BUILD/gfl" "$BUILD/stub/gsl"
git --git-dir="$GFL_GIT" archive "$GFL_HEADERS_COMMIT" cpp/include 2>/dev/null | tar x -C "$BUILD/gfl" \
    || { rm -rf "$BUILD/gfl.git"; git clone --quiet --bare "$GFL_GIT" "$BUILD/gfl.git";
         git --git-dir="$BUILD/gfl.git" archive "$GFL_HEADERS_COMMIT" cpp/include | tar x -C "$BUILD/gfl"; }
for header in gsl_rng gsl_randist gsl_sf; do
    echo "typedef struct gsl_rng gsl_rng;  /* stub: the Gaussian solver calls no GSL function */" \
        >"$BUILD/stub/gsl/$header.h"
done
SRC="$BUILD/pygfl-1.0.2"
gcc -O2 -fPIC -shared -w -I"$BUILD/gfl/cpp/include" -I"$BUILD/stub" \
    "$SRC/cpp/src/graph_fl.c" "$SRC/cpp/src/tf_dp.c" -o "$SRC/pygfl/libgraphfl.so" -lm

# 4. pygfl's Python: 2to3, networkx 2, the library path
"$PY" - "$SRC/pygfl" <<'EOF'
import sys, warnings
warnings.simplefilter("ignore")
from lib2to3.main import main
sys.exit(main("lib2to3.fixes", ["-w", "-n", "--no-diffs", sys.argv[1]]))
EOF
sed -i \
    -e 's/nx\.subgraph(g, g\.nodes())/g.copy()/g' \
    -e 's/nx\.subgraph(\([^()]*\))/nx.subgraph(\1).copy()/g' \
    -e 's/nx\.degree(subg)\.items()/dict(nx.degree(subg)).items()/g' \
    -e 's/list(nx\.degree(subg)\.values())/list(dict(nx.degree(subg)).values())/g' \
    "$SRC/pygfl/trails.py"
sed -i -e "s|cdll.LoadLibrary('libgraphfl.so')|cdll.LoadLibrary(__import__('os').path.join(__import__('os').path.dirname(__file__), 'libgraphfl.so'))|" \
    "$SRC/pygfl/solver.py"
SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -rf "$SITE/pygfl"
cp -r "$SRC/pygfl" "$SITE/pygfl"
echo "$PEER_DIR/src" >"$SITE/attpool2_src.pth"

# 5. check: pygfl solves a path, and attpool2's layers run forward and backward (its mp_utils
#    must be imported before torch and starts a pool of 8 processes)
"$PY" - <<'EOF'
import numpy as np
import attpool2.mp_utils  # noqa: F401  (before torch, as attpool2 requires)
from pygfl.easy import solve_gfl
import torch
from attpool2.torch_attention import FastFlexAddAttention

beta = solve_gfl(np.array([0.0, 0.1, 5.0, 5.2]), np.array([[0, 1], [1, 2], [2, 3]]), lam=1.0)
print("pygfl path solution:", np.round(beta, 4))
sizes = [5, 7]
edges = [np.array([[0, 1], [1, 2], [2, 3], [3, 4]]), np.array([[0, 1], [1, 2], [4, 5], [5, 6], [2, 6]])]
x = torch.rand(sum(sizes), 6, requires_grad=True)
for mapping in ("softmax", "sparsemax", "gfusedmax"):
    y = FastFlexAddAttention(6, 3, mapping, True)(x, sizes, edges)
    y.sum().backward()
    print(mapping, tuple(y.shape), "grad ok:", bool(torch.isfinite(x.grad).all()))
attpool2.mp_utils.get_torch_pool().terminate()
EOF
echo "attpool2 peer ready: $PY (sys.path has $PEER_DIR/src)"
