#!/usr/bin/env bash
# Set up (first run) and run every check: ruff (lint and format), the normal suite with the
# package's doctests, the serial tests alone, then the GPU kernels on numba's CUDA simulator
# (NUMBA_ENABLE_CUDASIM=1). On a machine with a GPU the normal suite already runs the GPU cases on
# the real device. Extra pytest arguments are passed to every pytest run. The service's Ray tests
# (tests/test_service_ray_*.py) run Ray inside a private network namespace they make themselves
# (tests/service_netns.py; root, or unprivileged user namespaces), so nothing listens on this
# machine's interfaces.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall seconds and the CPU seconds (user + sys) of the processes it waited for are
# printed after it ("-- step: N s wall, M s CPU"), so a log shows where a run's time went.
# (`times` runs in this shell, into a file: in a $(...) subshell it would count that subshell's
# children, none.)
TIMES=$(mktemp)
trap 'rm -f "$TIMES"' EXIT
_cpu() {  # CPU=seconds so far
    times >"$TIMES"
    CPU=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } printf "%.0f", s }' "$TIMES")
}
step() {
    _cpu
    STEP=$1 STEP_START=$SECONDS STEP_CPU=$CPU
}
step_done() {
    _cpu
    echo "-- $STEP: $((SECONDS - STEP_START)) s wall, $((CPU - STEP_CPU)) s CPU"
}
source scripts/_venv.sh
step "install (the package's own requirements)"
install_venv ""
step_done
# The package's own warm-up compiles the kernel variants the loaders, demos and training take into
# Numba's on-disk cache once; every test process, subprocess and spawned rank then loads them
# instead of several compiling the same variant at once on a fresh clone. With the cache already
# full it takes seconds. The cache is $NUMBA_CACHE_DIR (default: numba-cache in the environment's
# folder), absolute, as every test's subprocess inherits it whatever its working folder.
# Its Numba-only parts need nothing but the requirements just installed, so link, hetero, temporal
# and disk compile on one core while uv installs the test extras (PyTorch, TensorFlow, Paddle, JAX,
# Ray: unpacking and byte-compiling, ~55 s of CPU over both cores, ~45 s of wall on the idle CI;
# scripts/_venv.sh). It runs from this folder (`python -m` puts it first on sys.path), not from the
# editable install uv is rewriting. A failing warm-up does not stop the checks: the tests compile
# as they go, and test_newcomer.py's warm-ups fail the suite.
# The two tests that prove the cold path (test_warmup.py's first, which warms sample and gather
# into an empty cache, and test_cuda_typing.py, which compiles the attention kernels' CPU paths
# into one before typing every CUDA kernel) run next, beside that, into empty folders of their own
# (GGLSPEEDUP_COLD_CACHES: tests/numba_cache.py); once nothing compiles any more, what they
# compiled is added to the cache, and the warm-up's sample, gather and attention parts then
# compile only what is still missing. Before, the warm-up compiled the same kernels a second time
# (sample and gather ~47 s of CPU; ~38 of the attention part's ~64 s). They are deselected from
# the suite below, which they are part of.
mkdir -p "${NUMBA_CACHE_DIR:=$VENV/numba-cache}"
NUMBA_CACHE_DIR=$(cd "$NUMBA_CACHE_DIR" && pwd)
export NUMBA_CACHE_DIR
COLD_TESTS=(tests/test_cuda_typing.py::test_every_kernel_types_for_a_gpu_after_the_cpu_paths_ran
            tests/test_warmup.py::test_warmup_takes_every_compile_off_the_first_epoch)
COLD_CACHES=$(mktemp -d)
echo "== Numba's kernel cache (python -m gglspeedup warmup), beside the rest of the install"
"$VENV/bin/python" -m gglspeedup warmup --jobs 1 --parts link,hetero,temporal,disk &
WARMUP=$!
COLD=
# (if the install or ruff fails, the warm-up stops with the script; `|| true`: under set -e a
# failing kill in the trap would end the script with status 1 after every check had passed)
trap '[ -z "$WARMUP$COLD" ] || kill $WARMUP $COLD 2>/dev/null || true; rm -rf "$TIMES" "$COLD_CACHES"' EXIT
step "install (the test extras, beside the warm-up)"
install_venv "test,all,service"
step_done
echo "== ruff (lint, then format check; configuration in pyproject.toml)"
step "ruff"
"$VENV/bin/python" -m ruff check .
"$VENV/bin/python" -m ruff format --check .
step_done
echo "== the cold-cache tests (beside the warm-up), then the warm-up's sample, gather and attention"
step "cold-cache tests and the warm-up"
FAILED=0
GGLSPEEDUP_COLD_CACHES=$COLD_CACHES "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${COLD_TESTS[0]}" "$@" &
COLD=$!
GGLSPEEDUP_COLD_CACHES=$COLD_CACHES "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${COLD_TESTS[1]}" "$@" \
    || [ $? -eq 5 ] || FAILED=1
wait "$COLD" || [ $? -eq 5 ] || FAILED=1
COLD=  # waited for: its id may be reused, nothing to stop at exit
wait "$WARMUP" || echo "== the warm-up failed (exit $?): the tests compile as they go"
WARMUP=
for folder in "$COLD_CACHES"/*/; do
    [ -d "$folder" ] && "$VENV/bin/python" tests/numba_cache.py merge "$folder" "$NUMBA_CACHE_DIR"
done
"$VENV/bin/python" -m gglspeedup warmup --jobs 1 --parts sample,gather,attention \
    || echo "== the warm-up failed (exit $?): the tests compile as they go"
step_done
# Two pytest-xdist workers (GGLSPEEDUP_TEST_WORKERS to change): most of the suite's time is Numba
# compiles, subprocesses and spawned ranks, which a second worker overlaps on two cores. Each
# worker takes whole files, in tests/conftest.py's order (slow files first). Tests marked
# `serial` (they assert how soon Ctrl-C lands) run afterwards, alone.
WORKERS=(-n "${GGLSPEEDUP_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder)
# The 25 slowest tests of each pass are listed at its end, so a log shows where the time went.
SLOWEST=(--durations=25)
echo "== normal suite and doctests (CPU; GPU cases run here only on a GPU machine)"
step "normal suite"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "${SLOWEST[@]}" -m "not serial" --doctest-modules \
    "${COLD_TESTS[@]/#/--deselect=}" gglspeedup tests "$@"
step_done
echo "== the serial tests, alone"
# Only their files are collected (tests/conftest.py's SERIAL_FILES): collecting the whole suite to
# deselect it took 14 of this pass's ~40 s of CPU, with the other core idle.
# exit status 5: extra arguments (-k ...) selected none of them
SERIAL_FILES=(tests/test_interrupts.py)
step "serial tests"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${SLOWEST[@]}" -m serial "${SERIAL_FILES[@]}" "$@" || [ $? -eq 5 ]
step_done
# (After the normal suite, not beside it: run beside it at niceness 19 the idle CI took 761 s
# against 768, inside the runs' spread, and in the next run a Ray test that checks all of /dev/shm
# for leftovers failed on 8 `psm_` segments another process of the run had made.)
echo "== CUDA-simulator suite (GPU kernels on NUMBA_ENABLE_CUDASIM=1)"
step "simulator suite"
NUMBA_ENABLE_CUDASIM=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "${SLOWEST[@]}" -m cuda tests "$@" || [ $? -eq 5 ]
step_done
if [ "$FAILED" != 0 ]; then
    echo "== the cold-cache tests failed (their output is above the normal suite's)"
    exit 1
fi
