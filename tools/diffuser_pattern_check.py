"""Check that ``SequencePattern(compat="diffuser")`` reproduces Diffuser's own pattern bit for bit.

Runs Diffuser's ``graphTrainer._create_adj_mat`` (github asFeng/Diffuser, ``graphtrainer.py``:
the dense ``4096 x 4096`` matrix, ``np.random.seed(0)`` draws, ``np.nonzero`` per allowed length)
and compares every length it keeps (``window, 2 * window, ..., 4096``) edge for edge with ours,
in the Diffuser peer environment (``scripts/peer_env_diffuser.sh``):

    DGLBACKEND=pytorch PYTHONPATH=$PWD /work/peers/diffuser/venv/bin/python tools/diffuser_pattern_check.py

Also prints the fixture ``tests/test_attention_patterns_compat.py`` keeps (hashes of the edge lists
at short lengths) so CI checks the same edges without the peer. Exits non-zero on any difference.
"""

from __future__ import annotations

import hashlib
import sys
import time
import types

import numpy as np

from gglspeedup.attention import SequencePattern
from gglspeedup.bench.diffuser_peer import load


def edge_digest(src, dst) -> str:
    """SHA-256 of the (dst, src) edge list in DGL-graph order after sorting by (dst, src), int64."""
    order = np.lexsort((src, dst))
    pairs = np.stack([np.asarray(dst)[order], np.asarray(src)[order]]).astype(np.int64)
    return hashlib.sha256(pairs.tobytes()).hexdigest()


def main() -> int:
    graphtrainer, _ = load()
    config = types.SimpleNamespace(attention_window=[64] * 12, num_rand=64, num_glob=64)
    holder = types.SimpleNamespace(config=config)
    start = time.perf_counter()
    graphtrainer.graphTrainer._create_adj_mat(holder)
    print(f"Diffuser's _create_adj_mat: {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    pattern = SequencePattern(64, 64, 64, compat="diffuser", seed=0)
    failures = 0
    for length, (src, dst) in sorted(holder.src_dst.items()):
        graph = pattern.csc(int(length))
        ours_dst = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
        ours = edge_digest(np.asarray(graph.indices), ours_dst)
        theirs = edge_digest(src, dst)
        same = ours == theirs and graph.num_edges == len(src)
        failures += not same
        if length in (64, 128, 256, 512, 1024, 4096) or not same:
            print(f"length {int(length):5d}: {len(src):8d} edges, {'same' if same else 'DIFFERENT'} ({theirs[:16]})")
    print(f"ours (all lengths): {time.perf_counter() - start:.2f} s; {failures} lengths differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
