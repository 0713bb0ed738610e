#!/usr/bin/env bash
# Issue 43's second GPU call (after tools/gpu_round2.sh): what the first call left open, each step
# under its own time limit, in order of what the issue asks for:
#
#   bash tools/gpu_round2_more.sh OUT [TYPED_S] [ATTENTION_S] [UVA_S] [DIFFUSER_S]
#
#   1. tools/gpu_probe.py --steps typed (the typed call's host time)      -> OUT/typed.json
#   2. bench gpu's attention check with a longer budget (CPU rows, checks) -> OUT/attention.json
#   3. tools/gpu_uva_pages.py (pinned reads by span, 4 KiB vs huge pages)  -> OUT/uva.json
#   4. tools/gpu_diffuser_probe.py (the Diffuser layer's parts)            -> OUT/diffuser.json
#
# Every step's output also goes to OUT/session.log. GPU_ROUND2_SIZE=tiny: a dry run on the simulator.
set -u
out=${1:-gpu-round2-more}
typed_s=${2:-40}
attention_s=${3:-110}
uva_s=${4:-70}
diffuser_s=${5:-60}
# shellcheck source=tools/_gpu_round_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/_gpu_round_setup.sh"  # $size, $log, step, summary
uva=(--gb 12 --spans 0.25,1,4,12)
[ "$size" = tiny ] && uva=(--gb 0.0001 --spans 0.00001,0.0001 --rows 20)
if [ "$typed_s" != 0 ]; then
    step "typed probe (limit ${typed_s} s)"
    timeout "$typed_s" python3 tools/gpu_probe.py --steps typed --size "$size" --json "$out/typed.json" 2>&1 | tee -a "$log"
fi
if [ "$attention_s" != 0 ]; then
    step "attention (limit ${attention_s} s)"
    timeout "$attention_s" python3 -m gglspeedup.bench.gpu.checks attention --size "$size" --budget-s $((attention_s - 15)) \
        --json "$out/attention.json" 2>&1 | tee -a "$log"
    summary "$out/attention.json"
fi
if [ "$uva_s" != 0 ]; then
    step "UVA pages (limit ${uva_s} s)"
    timeout "$uva_s" python3 tools/gpu_uva_pages.py "${uva[@]}" --json "$out/uva.json" 2>&1 | tee -a "$log"
fi
if [ "$diffuser_s" != 0 ]; then
    step "Diffuser probe (limit ${diffuser_s} s)"
    timeout "$diffuser_s" python3 tools/gpu_diffuser_probe.py --size "$size" --json "$out/diffuser.json" 2>&1 | tee -a "$log"
fi
step "done"
