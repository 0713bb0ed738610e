# The set-up tools/gpu_round2.sh and tools/gpu_round2_more.sh share, sourced by each once it has
# set $out (the folder whose files come back): run from the checkout's root, it puts the checkout
# on PYTHONPATH, reads GPU_ROUND2_SIZE into $size (full, or tiny: a dry run on the simulator),
# makes $out and defines
#   step TEXT     a timestamped "=== HH:MM:SS TEXT" line, on stdout and in $out/session.log;
#   summary JSON  the status and summary of a check's JSON file (a missing file: its error), the same.
size=${GPU_ROUND2_SIZE:-full}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
mkdir -p "$out"
log="$out/session.log"
step() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }
summary() {
    python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(r['status'], r['summary'])" "$1" 2>&1 \
        | tee -a "$log"
}
