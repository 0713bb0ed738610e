#!/usr/bin/env bash
# Build the GammaGL peer environment: GammaGL 0.5.0 + TensorLayerX 0.5.8 on torch 2.1 (CPU and CUDA
# ops built in), in a virtual environment of its own, never the project's: GammaGL pins torch 2.1
# and numpy 1.24. Used by tools/gammagl_conformance.py, demos/gammagl_*.py and
# `python -m gglspeedup.bench gammagl`; never by CI. About 4 minutes and 5.8 GB on a fresh machine.
#
#   bash scripts/peer_env_gammagl.sh                      # venv in $GAMMAGL_VENV (default /work/peers/gammagl)
#   GAMMAGL_GIT=/path/to/GammaGL.git bash scripts/peer_env_gammagl.sh   # where GammaGL's sources come from
#   GAMMAGL_SERVICE=1 bash scripts/peer_env_gammagl.sh    # also ray + pymetis, for tools/gammagl_service.py
#
# What it does:
#   1. Python 3.11 venv with torch==2.1.2, torchvision==0.16.2, numpy 1.24, tensorlayerx==0.5.8,
#      gammagl_pt21==0.5.0.post121 (GammaGL 0.5.0), and gglspeedup's own dependencies at versions
#      that keep numpy 1.24 (numba 0.68.1 supports numpy >= 1.22; scipy 1.15.3 >= 1.23.5; xxhash for
#      saved graphs' and partitions' checksums).
#      gglspeedup itself is installed editable with --no-deps from this checkout, so the peer
#      venv always runs the working tree's code.
#   2. The two fixes TensorLayerX 0.5.8 needs on torch 2 (GammaGL's README points at a TLX fork
#      that is not on the registry), applied to this venv's copy of TensorLayerX only:
#        nn/core/core_torch.py          Module._named_members() accepts torch 2's remove_duplicate
#        optimizers/torch_optimizers.py Adam calls torch's functional adam with maximize=False and
#                                       singleton-tensor state steps (torch 2's signature)
#      Set GAMMAGL_TLX_FIXES=0 to leave TensorLayerX as the registry ships it (the demos then
#      say what is missing instead of training).
#   3. GammaGL's sources at the installed version's tag (v0.5.0: tests/loader, examples/graphsage,
#      the CPU sampler's C++) into $GAMMAGL_VENV/src, for the conformance script. The wheel has no
#      tests; GAMMAGL_GIT names a clone (default: GammaGL's public repository).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GAMMAGL_VENV:-/work/peers/gammagl}
PYTHON=${PYTHON:-python3.11}
TAG=v0.5.0
GIT_SOURCE=${GAMMAGL_GIT:-https://github.com/BUPT-GAMMA/GammaGL.git}

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" "torch==2.1.2" "torchvision==0.16.2" "numpy==1.24.*" "tensorlayerx==0.5.8" \
    "gammagl_pt21==0.5.0.post121" "numba==0.68.1" "scipy==1.15.3" "tbb==2023.2.0" "xxhash==4.1.0" "tqdm" "pytest"
"${PIP[@]}" --no-deps -e .
# The service (gglspeedup.service, tools/gammagl_service.py): Ray and METIS at constraints.txt's
# versions; both take numpy 1.24, so torch 2.1.2 / numpy 1.24 stay as they are (checked below).
if [ "${GAMMAGL_SERVICE:-0}" = "1" ]; then
    "${PIP[@]}" "ray==2.60.0" "pymetis==2025.2.2" "numpy==1.24.*" "torch==2.1.2"
fi

# 2. TensorLayerX on torch 2 (idempotent: an already fixed file is left alone).
if [ "${GAMMAGL_TLX_FIXES:-1}" = "1" ]; then
    "$VENV/bin/python" - <<'EOF'
import importlib.util
import os
import re

root = os.path.dirname(importlib.util.find_spec("tensorlayerx").origin)  # found, not imported


def fix(relative, old, new, done_marker):
    path = os.path.join(root, relative)
    with open(path) as handle:
        text = handle.read()
    if done_marker in text:
        print(f"already fixed: {relative}")
        return
    count = len(re.findall(re.escape(old), text))
    if count != 1:
        raise SystemExit(f"{relative}: expected one {old!r}, found {count}; not a TensorLayerX 0.5.8 file?")
    if not os.path.exists(path + ".orig"):  # the registry's file, kept beside the fixed one
        with open(path + ".orig", "w") as handle:
            handle.write(text)
    with open(path, "w") as handle:
        handle.write(text.replace(old, new))
    print(f"fixed: {relative}")


fix(
    "nn/core/core_torch.py",
    "def _named_members(self, get_members_fn, prefix='', recurse=True):",
    "def _named_members(self, get_members_fn, prefix='', recurse=True, remove_duplicate=True):",
    "recurse=True, remove_duplicate=True):",
)
# Adam's state initialisation, after the step line the fix replaces (it makes the match unique).
adam_state = (
    "                        # Exponential moving average of gradient values\n"
    "                        state['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)\n"
    "                        # Exponential moving average of squared gradient values\n"
    "                        state['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)\n"
    "                        if group['amsgrad']:\n"
    "                            # Maintains max of all exp. moving avg. of sq. grad. values\n"
    "                            state['max_exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)\n"
    "\n"
    "                    exp_avgs.append(state['exp_avg'])"
)
fix(
    "optimizers/torch_optimizers.py",
    "                        state['step'] = 0\n" + adam_state,
    "                        state['step'] = torch.tensor(0.0)  # torch 2: singleton-tensor steps\n" + adam_state,
    "state['step'] = torch.tensor(0.0)  # torch 2",
)
fix(
    "optimizers/torch_optimizers.py",
    "                   weight_decay=group['weight_decay'],\n                   eps=group['eps'])\n        return loss\n\n"
    "    def gradient(self, loss, weights=None, return_grad=True):\n"
    "        if weights is None:\n"
    "            raise AttributeError(\"Parameter train_weights must be entered.\")\n"
    "        if not self.init_optim:\n"
    "            self.optimizer_adam = ",
    "                   weight_decay=group['weight_decay'],\n"
    "                   eps=group['eps'],\n"
    "                   maximize=False)  # torch 2: a required keyword\n        return loss\n\n"
    "    def gradient(self, loss, weights=None, return_grad=True):\n"
    "        if weights is None:\n"
    "            raise AttributeError(\"Parameter train_weights must be entered.\")\n"
    "        if not self.init_optim:\n"
    "            self.optimizer_adam = ",
    "maximize=False)  # torch 2",
)
EOF
fi

# 3. GammaGL's sources at the tag (tests and examples are not in the wheel).
SRC="$VENV/src/GammaGL-$TAG"
if [ ! -d "$SRC/tests/loader" ]; then
    rm -rf "$SRC.tmp" && mkdir -p "$SRC.tmp"
    if [ -d "$GIT_SOURCE" ] && git --git-dir="$GIT_SOURCE" rev-parse --verify -q "$TAG" >/dev/null; then
        git --git-dir="$GIT_SOURCE" archive "$TAG" tests/loader examples/graphsage gammagl/ops/sparse/cpu \
            | tar -x -C "$SRC.tmp"
    else
        git clone -q --depth 1 --branch "$TAG" "$GIT_SOURCE" "$SRC.tmp/clone"
        (cd "$SRC.tmp/clone" && tar -c tests/loader examples/graphsage gammagl/ops/sparse/cpu) | tar -x -C "$SRC.tmp"
        rm -rf "$SRC.tmp/clone"
    fi
    mv "$SRC.tmp" "$SRC"
fi

# Check: versions, and that TLX trains on torch 2 here (or says why not).
TL_BACKEND=torch "$VENV/bin/python" - <<'EOF'
from importlib.metadata import version

import numpy, torch, numba, scipy, tensorlayerx

import gglspeedup
from gglspeedup.gammagl import tensorlayerx_problem

print(f"torch {torch.__version__}, numpy {numpy.__version__}, numba {numba.__version__}, scipy {scipy.__version__}, "
      f"tensorlayerx {tensorlayerx.__version__}, gammagl_pt21 {version('gammagl_pt21')}, gglspeedup from {gglspeedup.__file__}")
problem = tensorlayerx_problem()
print("TensorLayerX on torch 2:", problem or "trains")
try:  # GAMMAGL_SERVICE=1
    print(f"service: ray {version('ray')}, pymetis {version('pymetis')}")
except Exception:
    print("service: not installed (GAMMAGL_SERVICE=1 adds ray and pymetis)")
EOF
echo "GammaGL sources at $TAG: $SRC"
