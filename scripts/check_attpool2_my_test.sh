#!/usr/bin/env bash
# Run attpool2's own my-test.py on gglspeedup's classes, with only its import lines changed.
#
# attpool2 has no licence, so its script is never copied into the project: this reads it from the
# peer checkout that scripts/peer_env_attpool2.sh makes ($PEER_DIR/src/attpool2/my-test.py), writes
# a copy to a temporary folder with its two import lines replaced by
#     from gglspeedup.attention import Gfusedmax, Sparsemax, Softmax
#     from gglspeedup.attention import FastFlexAddAttention, MultipleAttention
# and runs it in the peer venv with this checkout first on PYTHONPATH. Its __main__ runs test()
# (softmax, sparsemax and gfusedmax attention, forward and backward); test_mapping() is run too.
# my-test.py builds its input with device='cuda': without a usable GPU that one argument is
# changed to device='cpu' as well (say so when you report it), since torch itself cannot
# allocate there. Exit status: the script's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PEER_DIR=${PEER_DIR:-/work/peers/attpool2}
PY="$PEER_DIR/venv/bin/python"
SOURCE="$PEER_DIR/src/attpool2/my-test.py"
[ -f "$SOURCE" ] || { echo "no $SOURCE: run scripts/peer_env_attpool2.sh first" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
sed -e 's/^from torch_mapping import Gfusedmax, Sparsemax, Softmax$/from gglspeedup.attention import Gfusedmax, Sparsemax, Softmax/' \
    -e 's/^from torch_attention import FastFlexAddAttention, MultipleAttention$/from gglspeedup.attention import FastFlexAddAttention, MultipleAttention/' \
    "$SOURCE" >"$WORK/my_test_gglspeedup.py"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    sed -i "s/device='cuda'/device='cpu'/" "$WORK/my_test_gglspeedup.py"
    echo "no usable GPU: device='cuda' -> device='cpu' in the copy"
fi
echo "changes against attpool2's my-test.py:"
diff "$SOURCE" "$WORK/my_test_gglspeedup.py" || true
cd "$WORK"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'PYEOF'
import runpy

import gglspeedup

print("gglspeedup from", gglspeedup.__file__)
namespace = runpy.run_path("my_test_gglspeedup.py", run_name="__main__")  # its own __main__: test()
namespace["test_mapping"]()
print("my-test.py: test() and test_mapping() ran on gglspeedup.attention")
PYEOF
