"""Random-row read ceiling of this machine: several processes, each gathering random rows with
``numpy.take`` from its own table, started together; add up the GB/s they print.

Usage (two processes starting together 12 s from now)::

    start=$(python -c "import time; print(time.time() + 12)")
    python tools/random_row_ceiling.py 1 "$start" & python tools/random_row_ceiling.py 2 "$start"; wait

Arguments: a seed (also the label) and a common start time (``time.time()`` units).
"""

import sys
import time

import numpy as np

ROWS, DIM, IDS, SECONDS = 2_000_000, 128, 200_000, 3.0


def main(seed: int, start: float) -> None:
    rng = np.random.default_rng(seed)
    table = rng.random((ROWS, DIM), dtype=np.float32)
    ids = rng.integers(0, ROWS, IDS)
    out = np.empty((IDS, DIM), np.float32)
    np.take(table, ids, axis=0, mode="clip", out=out)  # warm: pages touched, buffer faulted in
    time.sleep(max(0.0, start - time.time()))
    began, rounds = time.perf_counter(), 0
    while time.perf_counter() - began < SECONDS:
        np.take(table, ids, axis=0, mode="clip", out=out)
        rounds += 1
    print(f"proc {seed}: {rounds * out.nbytes / (time.perf_counter() - began) / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
