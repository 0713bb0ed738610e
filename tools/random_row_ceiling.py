"""Random-row read ceiling of this machine: N processes each running numpy.take on their own table.

Usage: start=$(python -c "import time; print(time.time() + 12)"); python tools/random_row_ceiling.py 1 $start & python tools/random_row_ceiling.py 2 $start; wait
(args: seed, a common start time so the processes overlap). Prints GB/s per process; add them up.
"""
import sys, time, numpy as np
rows, dim = 2_000_000, 128
rng = np.random.default_rng(int(sys.argv[1]))
x = rng.random((rows, dim), dtype=np.float32)
ids = rng.integers(0, rows, 200_000)
buf = np.empty((len(ids), dim), np.float32)
np.take(x, ids, axis=0, mode="clip", out=buf)
time.sleep(max(0, float(sys.argv[2]) - time.time()))
t = time.perf_counter(); n = 0
while time.perf_counter() - t < 3:
    np.take(x, ids, axis=0, mode="clip", out=buf); n += 1
print(f"proc {sys.argv[1]}: {n * buf.nbytes / (time.perf_counter() - t) / 1e9:.2f} GB/s")
