#!/usr/bin/env bash
# Build the PyG peer venv used by tools/pyg_conformance.py as the control: torch 2.13.0 (CPU),
# torch_geometric 2.8.1 (the version the project's venv has), pytest, and pyg-lib compiled from
# its source (pyg-lib has no wheel on the registry; without it PyG has no neighbour sampler).
# Never part of CI, never a dependency of the project.
#
# pyg-lib's source: a local git repository of pyg-lib (PYG_LIB_GIT) plus its three CPU submodules,
# parallel-hashmap (PHMAP_GIT), METIS (METIS_GIT) and METIS's own GKlib (GKLIB_GIT), each a local
# clone. Their trees are exported with `git archive` at the commits pyg-lib's tree records for
# its submodules (METIS's sample graphs and manual left out: the build needs neither). Build:
# FORCE_CUDA=0, MAX_JOBS=2, under nice; about 12 minutes on 2 idle cores, 20-30 on a busy one.
# The venv is about 1 GB.
#
#   PYG_LIB_GIT=... PHMAP_GIT=... METIS_GIT=... GKLIB_GIT=... scripts/peer_env_pyg.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-${PYG_PEER_VENV:-/work/peers/pyg}}
PYG_LIB_REF=${PYG_LIB_REF:-HEAD}
: "${PYG_LIB_GIT:?set PYG_LIB_GIT to a clone of pyg-lib}"
: "${PHMAP_GIT:?set PHMAP_GIT to a clone of parallel-hashmap}"
: "${METIS_GIT:?set METIS_GIT to a clone of METIS}"
: "${GKLIB_GIT:?set GKLIB_GIT to a clone of GKlib}"

if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3.11}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# gglspeedup's own runtime dependencies too, so tools/pyg_conformance.py runs our classes here
# (the project is imported from its source tree through PYTHONPATH, not installed).
"$PY" -m pip install -q --disable-pip-version-check -c constraints.txt "torch==2.13.0" \
    "torch_geometric==2.8.1" pytest numpy scipy numba tbb ml_dtypes setuptools wheel cmake ninja

SRC="$VENV/src/pyg-lib"
export_tree() { # git-dir commit dest [pathspec...]
    local git_dir=$1 commit=$2 dest=$3
    shift 3
    rm -rf "$dest"
    mkdir -p "$dest"
    git -C "$git_dir" archive "$commit" -- "$@" | tar -x -C "$dest"
}
sub_commit() { git -C "$1" ls-tree "$2" "$3" | awk '{print $3}'; } # git-dir commit path
LIB_COMMIT=$(git -C "$PYG_LIB_GIT" rev-parse "$PYG_LIB_REF")
METIS_COMMIT=$(sub_commit "$PYG_LIB_GIT" "$LIB_COMMIT" third_party/METIS)
if [ ! -f "$SRC/.exported-$LIB_COMMIT" ]; then
    export_tree "$PYG_LIB_GIT" "$LIB_COMMIT" "$SRC" .
    export_tree "$PHMAP_GIT" "$(sub_commit "$PYG_LIB_GIT" "$LIB_COMMIT" third_party/parallel-hashmap)" \
        "$SRC/third_party/parallel-hashmap" .
    export_tree "$METIS_GIT" "$METIS_COMMIT" "$SRC/third_party/METIS" . ':(exclude)graphs' ':(exclude)manual'
    export_tree "$GKLIB_GIT" "$(sub_commit "$METIS_GIT" "$METIS_COMMIT" GKlib)" "$SRC/third_party/METIS/GKlib" .
    touch "$SRC/.exported-$LIB_COMMIT"
fi

if ! "$PY" -c "import pyg_lib" 2>/dev/null; then
    rm -f "$SRC"/build/temp*/CMakeCache.txt  # re-detect the interpreter (and so the ABI) on a rebuild
    # pyg-lib's CMake asks "the" python3 whether torch uses the C++11 ABI: it must find this venv's
    # (a python without torch answers no, and the library then fails to load with an undefined
    # torch::autograd::Node::name symbol).
    (cd "$SRC" && VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" FORCE_CUDA=0 MAX_JOBS=2 CMAKE_BUILD_PARALLEL_LEVEL=2 \
        nice -n 10 "$PY" -m pip install -v --no-build-isolation --no-deps .) \
        >"$VENV/pyg_lib_build.log" 2>&1 || {
        echo "pyg-lib build failed; see $VENV/pyg_lib_build.log" >&2
        tail -30 "$VENV/pyg_lib_build.log" >&2
        exit 1
    }
fi
"$PY" - <<'EOF'
import torch
import torch_geometric
import torch_geometric.typing as t

import pyg_lib

print("torch", torch.__version__, "torch_geometric", torch_geometric.__version__,
      "pyg_lib", pyg_lib.__version__, "WITH_PYG_LIB", t.WITH_PYG_LIB)
assert t.WITH_PYG_LIB, "torch_geometric does not see pyg-lib"
EOF
