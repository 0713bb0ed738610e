"""Remote sampling in one process (LocalTransport, 2 groups) against the local sampler: batches/s
and bytes per batch against the minimum (unique ids 4 B, drawn edges 8 B, one count byte per row).
``python tools/remote_inprocess.py`` (papers-like:1000000, [15, 10], batch 1024, 30 batches x 3 rounds).
Issue 40's bench through Ray is ``python -m gglspeedup.bench service``; this isolates the kernels."""

import os
import tempfile
import time

import numpy as np

import gglspeedup as gg
from gglspeedup.datasets.papers_like import load_papers_like
from gglspeedup.service import LocalTransport, PartServer, RemoteSampler, partition

graph, _ = load_papers_like(1000000)
d = os.path.join(tempfile.mkdtemp(), "p")
book = partition(graph, d, 2, method="range")
tr = LocalTransport([PartServer(d, [0]), PartServer(d, [1])], [(0,), (1,)])
sent = {"bytes": 0, "min": 0}
real = tr.call


def call(requests, *, key=None):
    answers = real(requests, key=key)
    for g, (_m, p) in requests.items():
        sent["bytes"] += sum(v.nbytes for v in p.values() if isinstance(v, np.ndarray))
        sent["min"] += p["ids"].shape[0] * 4
        a = answers[g]
        sent["bytes"] += sum(v.nbytes for v in a.values() if isinstance(v, np.ndarray))
        sent["min"] += a["nbrs"].shape[0] * 8 + a["counts"].shape[0]
    return answers


tr.call = call
remote = RemoteSampler(tr, book, [15, 10])
local = gg.NeighborSampler(graph, [15, 10])
rng = np.random.default_rng(0)
batches = [rng.integers(0, graph.num_nodes, 1024) for _ in range(30)]
for s in (local, remote):
    s.sample(batches[0], key=0)
res = {"local": [], "remote": []}
for _r in range(3):
    for name, s in (("local", local), ("remote", remote)):
        t = time.perf_counter()
        for i, b in enumerate(batches):
            s.sample(b, key=i)
        res[name].append(len(batches) / (time.perf_counter() - t))
sent["bytes"] = sent["min"] = 0
for i, b in enumerate(batches):
    remote.sample(b, key=i)
print(
    {k: [round(v, 1) for v in vals] for k, vals in res.items()},
    "ratio",
    round(np.median(np.array(res["remote"]) / np.array(res["local"])), 3),
    "bytes/batch",
    sent["bytes"] // len(batches),
    "min",
    sent["min"] // len(batches),
    "x",
    round(sent["bytes"] / sent["min"], 3),
)
