#!/usr/bin/env bash
# Issue 43's one call on a lent GPU machine (GPU round 2): every step under its own time limit, the
# headline first, so a step that hangs or fails costs only its own share:
#
#   bash tools/gpu_round2.sh OUT [PAPERS_S] [CHECKS_S] [ATTENTION_S] [TESTS_S] [PROBE_S]
#
#   1. versions and the GPU                                     -> OUT/session.log (every step's log)
#   2. papers-like at full shape (bench gpu's "papers" check)   -> OUT/papers.json
#   3. bench gpu: bitwise, typed, gather                        -> OUT/report/report.{json,md}
#   4. bench gpu's attention check (its own 120 s budget)       -> OUT/attention.json
#   5. the GPU test suite, parallel workers                     -> OUT/pytest.log
#   6. tools/gpu_probe.py's typed and gather steps              -> OUT/probe.json
#
# At most 8 files come back from OUT (the device tool's limit): seven are written. A step given 0
# seconds is skipped. GPU_ROUND2_SIZE=tiny runs it all at toy sizes (a dry run on the simulator:
# NUMBA_ENABLE_CUDASIM=1, the tests step then skipped).
# The machine's python3 (its own numba, numba-cuda, CuPy, torch) runs the checkout in place.
set -u
out=${1:-gpu-round2}
papers_s=${2:-150}
checks_s=${3:-120}
attention_s=${4:-150}
tests_s=${5:-90}
probe_s=${6:-45}
# shellcheck source=tools/_gpu_round_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/_gpu_round_setup.sh"  # $size, $log, step, summary
mkdir -p "$out/report"
step "environment"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    nproc
    free -g | head -2
    python3 -c "import sys, numpy, numba, cupy; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__)"
    python3 -m pip list 2>/dev/null | grep -i -E "^(numba|cupy|numpy|torch |scipy|xxhash|pytest|cuda)"
} 2>&1 | tee -a "$log"
if [ "$papers_s" != 0 ]; then
    step "papers (limit ${papers_s} s)"
    timeout "$papers_s" python3 -m gglspeedup.bench.gpu.checks papers --size "$size" --json "$out/papers.json" 2>&1 | tee -a "$log"
    echo "papers exit ${PIPESTATUS[0]} (124: cut off)" | tee -a "$log"
    summary "$out/papers.json"
fi
if [ "$checks_s" != 0 ]; then
    step "bench gpu checks (deadline ${checks_s} s)"
    timeout $((checks_s + 30)) python3 -m gglspeedup.bench gpu --out "$out/report" --deadline "$checks_s" \
        --size "$size" --checks environment,bitwise,typed,gather 2>&1 | tee -a "$log"
fi
if [ "$attention_s" != 0 ]; then
    step "attention (limit ${attention_s} s)"
    timeout "$attention_s" python3 -m gglspeedup.bench.gpu.checks attention --size "$size" --json "$out/attention.json" \
        2>&1 | tee -a "$log"
    summary "$out/attention.json"
fi
if [ "$tests_s" != 0 ] && [ "$size" = full ]; then
    step "GPU tests (limit ${tests_s} s)"
    timeout "$tests_s" python3 -m pytest -q -p no:cacheprovider -m "cuda or gpu_hardware" -n 14 --timeout 80 -rfE \
        tests >"$out/pytest.log" 2>&1
    echo "pytest exit $? (124: cut off at ${tests_s} s)" | tee -a "$log"
    grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.log" | tail -30 | tee -a "$log"
fi
if [ "$probe_s" != 0 ]; then
    step "probe (limit ${probe_s} s)"
    timeout "$probe_s" python3 tools/gpu_probe.py --steps typed,gather --size "$size" --json "$out/probe.json" 2>&1 | tee -a "$log"
fi
step "done"
