"""Every CUDA kernel types and lowers for a real GPU, after the CPU paths ran in the same process.

The simulator runs kernels as Python, so it accepts code that numba-cuda's real pipeline rejects:
on an H200 the diffusion layer's kernels failed to type (``floordiv(omitted, omitted)``) in every
process that had first compiled the CPU path with a cold cache, because the CPU overloads of the
shared dot-product helper were inlined overloads whose IR was reused for the CUDA target. This
runs ``tools/compile_ptx.py --typing-only --cpu-first`` in a fresh process with an empty numba
cache: numba's typing and lowering of all kernel variants, no GPU, no toolkit. (Under
``scripts/test.sh`` the empty cache is one the script then adds to the suite's: ``cold_cache.py``.)
"""

import os
import subprocess
import sys

import pytest
from cold_cache import cold_cache


@pytest.mark.slow
def test_every_kernel_types_for_a_gpu_after_the_cpu_paths_ran(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    cache = env["NUMBA_CACHE_DIR"] = cold_cache(tmp_path, "cuda-typing")  # the failure needed a cold CPU compile
    done_marker = os.path.join(cache, "cpu-paths-done")  # scripts/test.sh takes their kernels from here meanwhile
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    script = os.path.join(root, "tools", "compile_ptx.py")
    done = subprocess.run(
        [sys.executable, script, "--typing-only", "--cpu-first", "--cpu-done", done_marker],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    assert done.returncode == 0, f"{last}\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert last.endswith("kernels typed and lowered; 0 failure(s)"), last
    assert os.path.exists(done_marker)
