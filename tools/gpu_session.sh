#!/usr/bin/env bash
# One call on a lent GPU machine, measurements first (they are what the lease is for), then the GPU
# test suite in parallel workers, each under its own time limit so one cannot eat the other's:
#
#   bash tools/gpu_session.sh OUT [BENCH_DEADLINE_S] [TEST_LIMIT_S] [CHECKS] [PYTEST_TARGET...]
#
# The machine's python3 (its own numba, numba-cuda, CuPy) runs the checkout in place (PYTHONPATH).
# OUT gets env.txt, bench.log, report/report.{md,json} and pytest.log.
set -u
out=${1:-gpu-report}
deadline=${2:-230}
test_limit=${3:-150}
checks=${4:-environment,bitwise,streams,staging,sampling,typed,gather}
shift $(($# < 4 ? $# : 4))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tests)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
mkdir -p "$out"
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    nproc
    python3 -c "import sys, numpy, numba, cupy; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__)"
    python3 -m pip list 2>/dev/null | grep -i -E "^(numba|cupy|numpy|torch |scipy|xxhash|pytest|hypothesis|cuda)"
} 2>&1 | tee "$out/env.txt"
if [ "$deadline" != 0 ]; then
    timeout $((deadline + 30)) python3 -m gglspeedup.bench gpu --out "$out/report" --deadline "$deadline" \
        --checks "$checks" 2>&1 | tee "$out/bench.log"
fi
if [ "$test_limit" != 0 ]; then
    workers=()
    python3 -c "import xdist" 2>/dev/null && workers=(-n 12)
    timeout "$test_limit" python3 -m pytest -q -p no:cacheprovider -m "cuda or gpu_hardware" "${workers[@]}" \
        --timeout 120 -rfE "${targets[@]}" >"$out/pytest.log" 2>&1
    echo "pytest exit $? (124: cut off at ${test_limit} s)"
    grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.log" | tail -40
fi
