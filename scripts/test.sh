#!/usr/bin/env bash
# Set up (first run) and run every check: ruff (lint and format), tests/test_cuda_typing.py beside
# the warm-up, the normal suite with the package's doctests, then the serial tests with the GPU
# kernels on numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) beside them. On a machine with a GPU
# the normal suite already runs the GPU cases on the real device. Extra pytest arguments are
# passed to every pytest run. The service's Ray tests (tests/test_service_ray_*.py) run Ray inside
# a private network namespace they make themselves (tests/service_netns.py; root, or unprivileged
# user namespaces), so nothing listens on this machine's interfaces, with a /dev/shm of their own.
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
# Its Numba-only parts need nothing but the requirements just installed, so they compile on one
# core while uv installs the test extras (PyTorch, TensorFlow, Paddle, JAX, Ray: unpacking and
# byte-compiling, ~55 s of CPU over both cores, ~45 s of wall on the idle CI; scripts/_venv.sh);
# the temporal and disk parts follow the install, beside them, and then the attention and gather
# parts. Their CPU seconds in a clean-clone CI (3 processes on the 2 cores after the install):
# sample, link and hetero 152 (beside the install; with gather 172 s, and that process then ended
# 35 s after the others), temporal and disk 57, attention 44 (starting from the CPU-path overloads
# below), gather 12-20. It runs from this folder (`python -m` puts it first on sys.path), not from
# the editable install uv is rewriting. A failing warm-up does not stop the checks: the tests
# compile as they go, and test_newcomer.py's warm-ups fail the suite.
# Beside them, after the install, runs test_cuda_typing.py, whose one test compiles the attention
# kernels' CPU paths into an empty cache before typing every CUDA kernel (it proves the cold path;
# ~128 s of CPU, the suite's longest), into a folder named here (GGLSPEEDUP_COLD_CACHES,
# tests/cold_cache.py); the overloads it compiled are added to the cache as soon as its CPU paths
# ran (tools/compile_ptx.py --cpu-done), and the warm-up's attention part starts from them (57
# against 96 s of CPU alone), as do the attention tests: test_attention_{diffusion,pooling,
# pooling_layer,face,sharded}.py took 105 s of CPU with them in the cache and 154 s without. The
# test is deselected from the suite below.
mkdir -p "${NUMBA_CACHE_DIR:=$VENV/numba-cache}"
NUMBA_CACHE_DIR=$(cd "$NUMBA_CACHE_DIR" && pwd)
export NUMBA_CACHE_DIR
COLD_TEST=tests/test_cuda_typing.py::test_every_kernel_types_for_a_gpu_after_the_cpu_paths_ran
COLD_CACHES=$(mktemp -d)
echo "== Numba's kernel cache (python -m gglspeedup warmup), beside the rest of the install"
"$VENV/bin/python" -m gglspeedup warmup --jobs 1 --parts sample,link,hetero &
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
echo "== the warm-up's temporal, disk, attention and gather parts, beside $COLD_TEST"
step "warm-up (temporal, disk, attention and gather, then the rest's end) and the cold-cache test"
GGLSPEEDUP_COLD_CACHES=$COLD_CACHES "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$COLD_TEST" "$@" &
COLD=$!
"$VENV/bin/python" -m gglspeedup warmup --jobs 1 --parts temporal,disk || echo "== the warm-up failed (exit $?): the tests compile as they go"
# The attention part waits for the test's CPU paths (their marker; or the test's end) and starts
# from their overloads, beside the test's typing of the CUDA kernels (57 against 96 s of CPU).
while [ ! -e "$COLD_CACHES/cuda-typing/cpu-paths-done" ] && kill -0 "$COLD" 2>/dev/null; do
    sleep 1
done
merge_cold_caches() {
    local folder
    for folder in "$COLD_CACHES"/*/; do
        [ ! -d "$folder" ] || "$VENV/bin/python" tests/cold_cache.py merge "$folder" "$NUMBA_CACHE_DIR" \
            || echo "== merging $folder failed (exit $?): the tests compile what it held"
    done
}
merge_cold_caches
"$VENV/bin/python" -m gglspeedup warmup --jobs 1 --parts attention,gather || echo "== the warm-up failed (exit $?): the tests compile as they go"
COLD_STATUS=0
wait "$COLD" || COLD_STATUS=$?
COLD=  # waited for: its id may be reused, nothing to stop at exit
merge_cold_caches  # anything it cached after the marker
wait "$WARMUP" || echo "== the warm-up failed (exit $?): the tests compile as they go"
WARMUP=
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
    --deselect="$COLD_TEST" gglspeedup tests "$@"
step_done
echo "== the serial tests, alone on their core, beside the CUDA-simulator suite at niceness 19"
# Only their files are collected (tests/conftest.py's SERIAL_FILES): collecting the whole suite to
# deselect it took 14 of this pass's ~40 s of CPU, with the other core idle.
# exit status 5: extra arguments (-k ...) selected none of them
# The simulator suite (GPU kernels on NUMBA_ENABLE_CUDASIM=1, two workers) runs beside them at
# niceness 19: a core the serial tests want is theirs (CFS weighs niceness 19 at 15 against 1024),
# and the simulator takes the other one, then both. One after the other they took 21 + 42 s of
# wall for 22 + 67 s of CPU on the 2-core CI machine. (Beside the normal suite it bought 7 s, and
# a Ray test that checked all of /dev/shm for leftovers failed on another process's segments;
# the Ray tests now have a /dev/shm of their own, tests/service_netns.py.) Its output follows the
# serial tests'.
SERIAL_FILES=(tests/test_interrupts.py)
step "serial tests, beside the simulator suite"
SIMULATOR_LOG=$(mktemp)
SIMULATOR=
trap '[ -z "$SIMULATOR" ] || kill "$SIMULATOR" 2>/dev/null || true; rm -rf "$TIMES" "$COLD_CACHES" "$SIMULATOR_LOG"' EXIT
NUMBA_ENABLE_CUDASIM=1 nice -n 19 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${WORKERS[@]}" "${SLOWEST[@]}" \
    -m cuda tests "$@" >"$SIMULATOR_LOG" 2>&1 &
SIMULATOR=$!
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${SLOWEST[@]}" -m serial "${SERIAL_FILES[@]}" "$@" || [ $? -eq 5 ]
echo "== CUDA-simulator suite (GPU kernels on NUMBA_ENABLE_CUDASIM=1; its output)"
SIMULATOR_STATUS=0
wait "$SIMULATOR" || SIMULATOR_STATUS=$?
SIMULATOR=
cat "$SIMULATOR_LOG"
[ "$SIMULATOR_STATUS" -eq 0 ] || [ "$SIMULATOR_STATUS" -eq 5 ]
step_done
if [ "$COLD_STATUS" != 0 ] && [ "$COLD_STATUS" != 5 ]; then
    echo "== $COLD_TEST failed (its output is above the normal suite's)"
    exit 1
fi
