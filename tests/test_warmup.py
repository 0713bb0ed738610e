"""First-run compilation: ``python -m gglspeedup warmup`` fills Numba's cache so a training process
compiles nothing, and the cache works when the package folder is read-only.

Each test runs fresh processes with ``NUMBA_DEBUG_CACHE=1``, which makes Numba print ``data saved
to`` for every kernel overload it compiles and caches, and ``data loaded from`` for every one it
loads, naming its data file.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The drop-in's epoch as GammaGL's loop runs it: sampling [25, 10] and the rows of n_id.
EPOCH = """
import numpy as np
from gglspeedup.gammagl import NeighborSampler
rng = np.random.default_rng(0)
edge_index = rng.integers(0, 500, size=(2, 5000))
x = rng.random((500, 8), dtype=np.float32)
for dst_node, n_id, adjs, rows in NeighborSampler(edge_index, [25, 10], batch_size=64, x=x, backend="numpy"):
    assert np.array_equal(rows, x[n_id])
print("epoch done")
"""


def run(code_or_args, env, cwd):
    command = (
        [sys.executable, *code_or_args] if isinstance(code_or_args, list) else [sys.executable, "-c", code_or_args]
    )
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env.update(NUMBA_DEBUG_CACHE="1", **extra)
    return env


def compiled_overloads(output: str) -> set:
    """The compiled overloads a process used: the data files Numba says it loaded or saved."""
    return set(re.findall(r"data (?:loaded from|saved to) '([^']+\.nbc)'", output))


@pytest.mark.slow
def test_warmup_takes_every_compile_off_the_first_epoch():
    # The warm-up and then the epoch, each in a fresh process on the same cache, the one this run
    # uses (warm or cold): every compiled overload the epoch loads (or compiles) must be one the
    # warm-up loaded (or compiled). On an empty cache that is "after the warm-up the epoch compiles
    # nothing"; on a warm one it also catches an overload only another job had put there, without
    # compiling the warm-up's ~50 s of kernels again into a cache of the test's own.
    env = dict(os.environ, NUMBA_DEBUG_CACHE="1", PYTHONPATH=ROOT)
    warm = compiled_overloads(run(["-m", "gglspeedup", "warmup", "--parts", "sample,gather"], env, ROOT))
    epoch_output = run(EPOCH, env, ROOT)
    assert "epoch done" in epoch_output
    epoch = compiled_overloads(epoch_output)
    assert warm and epoch  # both took kernels through the cache (not a run with caching off)
    assert epoch <= warm, f"the epoch took kernels the warmup does not: {sorted(epoch - warm)}"


def test_warmup_rejects_unknown_parts():
    from gglspeedup.warmup import warmup

    with pytest.raises(ValueError, match="parts must be some of"):
        warmup(["sample", "everything"])


def test_warmup_command_rejects_no_parts_and_help_is_not_an_error(capsys):
    from gglspeedup.__main__ import main

    with pytest.raises(SystemExit) as done:  # compiled nothing and said "warmup of  done"
        main(["warmup", "--parts", " , "])
    assert done.value.code == 2 and "--parts must name at least one of sample" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:  # said "parts must be ...", not the option's name
        main(["warmup", "--parts", "sample,everything"])
    assert done.value.code == 2 and "error: --parts must be some of [" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "warmup" in capsys.readouterr().out
    assert main(["bogus"]) == 2 and "usage: python -m gglspeedup" in capsys.readouterr().err
    # the usage alone did not say what was wrong
    assert main(["warmpu"]) == 2 and "python -m gglspeedup: error: unknown command 'warmpu'" in capsys.readouterr().err
    assert main([]) == 2 and capsys.readouterr().err.endswith("python -m gglspeedup: error: a command is required\n")


def _read_only_runner(folder):
    """A command prefix that runs a process seeing ``folder`` read-only, or ``None``."""
    if os.geteuid() == 0:  # root writes through permission bits: mount it read-only instead
        unshare = shutil.which("unshare")
        if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
            return None
        return [unshare, "-m", "sh", "-c", f'mount --bind -o ro "{folder}" "{folder}" && exec "$@"', "sh"]
    for path, _, files in os.walk(folder):
        os.chmod(path, 0o555)
        for name in files:
            os.chmod(os.path.join(path, name), 0o444)
    return []


@pytest.mark.slow
def test_cache_goes_to_the_user_cache_when_the_package_is_read_only(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "gglspeedup"), site / "gglspeedup", ignore=shutil.ignore_patterns("__pycache__"))
    prefix = _read_only_runner(str(site))
    if prefix is None:
        pytest.skip("cannot make a read-only folder here (root without mount namespaces)")
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "user-cache"), PYTHONPATH=str(site), HOME=str(tmp_path))
    code = (
        "import numpy as np, gglspeedup as gg\n"
        f"assert gg.__file__.startswith({str(site)!r}), gg.__file__\n"
        "graph = gg.CSRGraph.from_edge_index(np.array([[1, 2, 3, 0], [0, 0, 1, 2]]), num_nodes=4)\n"
        "print(gg.NeighborSampler(graph, [2, -1]).sample([0, 1]).n_id.tolist())\n"
        "open(gg.__file__ + '.probe', 'w')\n"
    )
    outputs = []
    try:
        for _ in range(2):
            command = [*prefix, sys.executable, "-c", code]
            done = subprocess.run(command, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=900)
            # the last line writes beside the sources: refused, so the folder really was read-only
            assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr, done.stderr[-3000:]
            outputs.append(done.stdout + done.stderr)
    finally:
        for path, _, _ in os.walk(site):
            os.chmod(path, 0o755)  # let tmp_path be removed (non-root runs)
    user_cache = str(tmp_path / "user-cache" / "numba")
    saved = [line for line in outputs[0].splitlines() if "data saved to" in line]
    assert saved and all(user_cache in line for line in saved)  # compiled once, cached in the user folder
    assert "data loaded from" in outputs[1] and "data saved to" not in outputs[1]  # the next process loads
    assert not any(name.endswith(".nbi") for _, _, files in os.walk(site) for name in files)
