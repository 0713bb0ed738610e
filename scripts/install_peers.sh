#!/usr/bin/env bash
# Install the optional benchmark peers (DGL, PyG) into the project venv, for
# `python -m gglspeedup.bench sample --peers dgl,pyg` only. Never part of CI, never a dependency.
#
# The installed torch must not change (an unpinned torch resolves to a multi-GB CUDA build), so:
#   * DGL 2.1.0 (the newest cp311 wheel) goes in with --no-deps, plus the deps its classic sampler
#     imports: torchdata 0.8.0 (also --no-deps: its own requirement would pull another torch),
#     pyyaml, pydantic, pandas (dgl.graphbolt imports them), networkx/requests/psutil/tqdm.
#     Its GraphBolt native library exists only for torch 2.0-2.2; gglspeedup.bench.peers imports
#     DGL through an import hook that makes that library load non-fatal (the classic sampler we
#     measure never uses GraphBolt), so nothing in site-packages is edited.
#     setuptools<70 is NOT needed when `packaging` is installed (dgl.utils falls back to
#     setuptools' vendored copy only without it), so the venv's setuptools stays as it is.
#   * torch_geometric is pure Python. Its neighbour sampler needs pyg-lib (not on PyPI) or
#     torch-sparse + torch-scatter (source only: about 25 minutes to compile on 2 idle cores,
#     an hour under nice on a busy one; verified here: torch-scatter 2.1.2, torch-sparse 0.6.18). Set
#     WITH_TORCH_SPARSE=1 to compile it; without either, the pyg peer reports itself unavailable.
# Every install runs under constraints.txt, and the script fails if torch's version moved.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GGLSPEEDUP_VENV:-.venv}
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check -c constraints.txt)

torch_before=$("$PY" -c "import torch; print(torch.__version__)")
echo "torch before: $torch_before"

"${PIP[@]}" --no-deps "dgl==2.1.0" "torchdata==0.8.0"
"${PIP[@]}" networkx requests psutil tqdm packaging pyyaml pydantic pandas
"${PIP[@]}" torch_geometric
if [ "${WITH_TORCH_SPARSE:-0}" = "1" ]; then
    # Builds against the installed torch; --no-build-isolation keeps pip from fetching another.
    "${PIP[@]}" --no-build-isolation --no-deps torch-scatter torch-sparse
fi

torch_after=$("$PY" -c "import torch; print(torch.__version__)")
echo "torch after:  $torch_after"
if [ "$torch_before" != "$torch_after" ]; then
    echo "error: installing the peers changed torch ($torch_before -> $torch_after)" >&2
    exit 1
fi

# Check that each peer really samples here.
"$PY" - <<'EOF'
import numpy as np

from gglspeedup import CSRGraph
from gglspeedup.bench import peers

graph = CSRGraph.from_edge_index(np.array([[1, 2, 3, 0, 2], [0, 0, 1, 2, 3]]), num_nodes=4)
for name in peers.PEERS:
    try:
        contender = peers.prepare(name, graph, [2, 2], seed=0)
        edges = contender.sample(contender.convert(np.array([0, 1], dtype=np.int64)))
        print(f"{name}: {contender.version}: sampled {edges} edges")
    except peers.PeerUnavailable as error:
        print(f"{name}: unavailable: {error}")
EOF
