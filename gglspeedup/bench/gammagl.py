"""``python -m gglspeedup.bench gammagl``: GammaGL's GraphSAGE loop on GammaGL's sampler and on ours.

Runs in the GammaGL environment (``bash scripts/peer_env_gammagl.sh``; ``TL_BACKEND`` defaults to
``torch`` here)::

    python -m gglspeedup.bench gammagl --graph powerlaw:200000:25 --fanouts 25,10 --batch 1024

Everything is GammaGL's loop (``examples/graphsage/reddit_sage_trainer.py``): ``for dst_node,
n_id, adjs in loader``, ``tlx.gather(x, n_id)``, ``TrainOneStep`` on ``GraphSAGE_Sample_Model``.
Contenders, in interleaved rounds over the same seed batches (``shuffle=False`` on one random
permutation), each round one epoch of ``--batches`` batches per contender:

- sampling: ``gammagl.loader.NeighborSampler`` vs :class:`gglspeedup.gammagl.NeighborSampler`
  (iterating the loader);
- sampling + gather: the same plus the loop's ``tlx.gather(x, n_id)``;
- epoch: the whole loop with GammaGL's sampler, with ours, with ours and ``prefetch=2, x=x`` (the
  next batch sampled and its rows gathered on a background thread while the model trains), the
  same with ``prefetch_nice=19`` (that thread on the cycles the model leaves idle), and the model
  alone over batches prepared beforehand (the floor the prefetching epoch is held to);
  ``--epoch-contenders`` picks some of them.
- loop: for each epoch contender, timed per batch inside the same loop, the time outside the
  model step (the loader's ``next`` and the loop's gather) over the step time of the same epoch,
  and the step time over the model-only epoch's of the same round, batch by batch: the first
  says what the loop waits for, the second what the loader's thread takes from the model's cores.
  Unlike the epoch walls, the first does not depend on the load changing between epochs.

Ratios are medians of per-round paired ratios. Also reported: construction time of both loaders,
and ours's first batch apart from the warm ones, in this process (the Numba cache as found) and in
fresh processes with an empty and then a filled Numba cache (``--first-call``; compile vs cache
load, see ``docs/gammagl.md``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

__all__ = ["add_arguments", "run"]

PREFETCHING = "ours, prefetch=2, x="
YIELDING = "ours, prefetch=2, x=, prefetch_nice=19"  # the producer on the cycles the model leaves idle


def add_arguments(parser) -> None:
    """Add this command's options to an ``argparse`` parser."""
    from ._options import add_common_arguments

    add_common_arguments(
        parser,
        graph="powerlaw:200000:25",
        fanouts="25,10",
        batch=(1024, "seed nodes per batch (default 1024)"),
        batches=(10, "batches per epoch (default 10)"),
        repeats=(5, "interleaved rounds; medians reported (default 5)"),
        dim=128,
    )
    parser.add_argument("--hidden", type=int, default=256, help="GraphSAGE hidden width (default 256)")
    parser.add_argument("--classes", type=int, default=41, help="output classes (default 41, Reddit's)")
    parser.add_argument("--parts", default="sample,gather,epoch", help="which tables: sample, gather, epoch")
    parser.add_argument("--first-call", default="yes", choices=("yes", "no"), help="cold/warm-cache subprocesses")
    parser.add_argument(
        "--epoch-contenders",
        default=None,
        help=f"the epoch table's loops: gammagl, ours, prefetch ({PREFETCHING!r}), nice ({YIELDING!r}), model "
        "(default: all five)",
    )
    add_common_arguments(parser, seed=(0, None), threads=None)


def _imports():
    os.environ.setdefault("TL_BACKEND", "torch")
    try:
        import tensorlayerx as tlx
        from gammagl.loader import NeighborSampler as GammaGLSampler
        from gammagl.models import GraphSAGE_Sample_Model
        from tensorlayerx.model import TrainOneStep, WithLoss
    except ImportError as error:
        raise SystemExit(
            f"bench gammagl needs GammaGL and TensorLayerX ({error}); run it in the environment "
            "scripts/peer_env_gammagl.sh builds"
        ) from None
    return tlx, GammaGLSampler, GraphSAGE_Sample_Model, TrainOneStep, WithLoss


def _edges(adjs) -> int:
    adjs = adjs if isinstance(adjs, list) else [adjs]
    return sum(int(adj.edge_index.shape[1]) for adj in adjs)


def run(args) -> dict:
    from ..gammagl import NeighborSampler, tensorlayerx_problem
    from ._common import format_table, load_graph, machine_info, parse_fanouts, set_threads

    tlx, GammaGLSampler, Model, TrainOneStep, WithLoss = _imports()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if "epoch" in parts and (problem := tensorlayerx_problem()):
        raise SystemExit(problem)
    set_threads(args.threads)
    fanouts = parse_fanouts(args.fanouts)
    graph, description = load_graph(args.graph)
    rng = np.random.default_rng(args.seed)
    sources = np.asarray(graph.indices, dtype=np.int64)
    targets = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    count = args.batch * args.batches
    if count > graph.num_nodes:
        raise ValueError(f"--batch x --batches = {count} seeds, more than the graph's {graph.num_nodes} nodes")
    edge_index = tlx.convert_to_tensor(np.stack([sources, targets]))
    node_idx = tlx.convert_to_tensor(rng.permutation(graph.num_nodes)[:count].astype(np.int64))
    x = tlx.convert_to_tensor(rng.standard_normal((graph.num_nodes, args.dim), dtype=np.float32))
    y = tlx.convert_to_tensor(rng.integers(0, args.classes, graph.num_nodes).astype(np.int64))

    def build(kind, **options):
        start = time.perf_counter()
        if kind == "gammagl":
            loader = GammaGLSampler(
                edge_index=edge_index, node_idx=node_idx, sample_lists=fanouts, batch_size=args.batch
            )
        else:
            loader = NeighborSampler(
                edge_index, fanouts, node_idx=node_idx, batch_size=args.batch, seed=args.seed, **options
            )
        return loader, time.perf_counter() - start

    theirs, theirs_build_s = build("gammagl")
    ours, ours_build_s = build("ours")
    prefetching, _ = build("ours", x=x, prefetch=2)
    yielding, _ = build("ours", x=x, prefetch=2, prefetch_nice=19)
    first, warm = _first_batches(ours)
    results = {
        "command": "gammagl",
        "graph": description,
        "fanouts": fanouts,
        "batch": args.batch,
        "batches": args.batches,
        "repeats": args.repeats,
        "machine": machine_info(),
        "construction_s": {"gammagl": theirs_build_s, "ours": ours_build_s},
        "first_batch_s": first,
        "warm_batch_s": warm,
    }
    net = Model(in_feat=args.dim, hid_feat=args.hidden, out_feat=args.classes, drop_rate=0.5, num_layers=len(fanouts))

    class Loss(WithLoss):  # examples/graphsage/reddit_sage_trainer.py's SemiSpvzLoss
        def __init__(self, net, loss_fn):
            super().__init__(backbone=net, loss_fn=loss_fn)

        def forward(self, data, label):
            logits = self.backbone_network(data["x"], data["subgs"])
            return self._loss_fn(logits, tlx.gather(data["y"], data["dst_node"]))

    train_one_step = TrainOneStep(
        Loss(net, tlx.losses.softmax_cross_entropy_with_logits), tlx.optimizers.Adam(0.0005), net.trainable_weights
    )
    label = tlx.convert_to_tensor([0])

    def step(features, dst_node, adjs):
        net.set_train()
        train_one_step({"x": features, "y": y, "dst_node": dst_node, "subgs": adjs}, label)

    def sample_epoch(loader, gather=False):
        edges = 0
        for _dst_node, n_id, adjs in loader:
            edges += _edges(adjs)
            if gather:
                tlx.gather(x, n_id)
        return edges

    loops = {}  # epoch contender -> one list per epoch of (outside_s, step_s) per batch
    cpu_s = {}  # epoch contender -> the process's CPU seconds per epoch

    def train_epoch(name, batches):
        """GammaGL's loop over ``batches`` (``(features, dst_node, adjs)``, made as the loop asks
        for them), timing per batch the time outside the model step (in the loader's ``next``,
        the gather included) and the step itself."""
        edges, times = 0, []
        cpu, mark = time.process_time(), time.perf_counter()
        for features, dst_node, adjs in batches:
            got = time.perf_counter()
            step(features, dst_node, adjs)
            done = time.perf_counter()
            times.append((got - mark, done - got))
            edges += _edges(adjs)
            mark = done
        loops.setdefault(name, []).append(times)
        cpu_s.setdefault(name, []).append(time.process_time() - cpu)  # every thread of the process
        return edges

    def gathered(loader):
        return ((tlx.gather(x, n_id), dst_node, adjs) for dst_node, n_id, adjs in loader)

    prepared = [(tlx.gather(x, n_id), dst_node, adjs) for dst_node, n_id, adjs in ours]
    epochs = {
        "gammagl": lambda: train_epoch("gammagl", gathered(theirs)),
        "ours": lambda: train_epoch("ours", gathered(ours)),
        PREFETCHING: lambda: train_epoch(PREFETCHING, ((f, d, a) for d, _, a, f in prefetching)),
        YIELDING: lambda: train_epoch(YIELDING, ((f, d, a) for d, _, a, f in yielding)),
        "model only": lambda: train_epoch("model only", iter(prepared)),
    }
    keys = dict(zip(("gammagl", "ours", "prefetch", "nice", "model"), epochs))
    chosen = [k.strip() for k in (args.epoch_contenders or ",".join(keys)).split(",") if k.strip()]
    if not set(chosen) <= set(keys) or "model" not in chosen:
        raise ValueError(f"--epoch-contenders must name some of {list(keys)}, model among them; got {chosen}")
    chosen = [keys[k] for k in chosen]
    tables = {
        "sample": {"gammagl": lambda: sample_epoch(theirs), "ours": lambda: sample_epoch(ours)},
        "gather": {
            "gammagl": lambda: sample_epoch(theirs, gather=True),
            "ours": lambda: sample_epoch(ours, gather=True),
        },
        "epoch": {name: epochs[name] for name in chosen},
    }
    for part in ("sample", "gather", "epoch"):
        if part in parts:
            results[part] = _interleaved(tables[part], args.repeats)
    if "epoch" in parts:
        results["loop"] = _loop_shares(loops, args.repeats, cpu_s)
    if args.first_call == "yes":
        results["first_call_subprocess"] = _first_call_subprocesses(args.graph, fanouts, args.batch, args.seed)
    _print(results, format_table)
    return results


def _loop_shares(loops: dict, repeats: int, cpu_s: dict | None = None) -> dict:
    """Per epoch contender, from its timed epochs (the warm-up one dropped): the time outside the
    model step as a share of the step time in the same epoch (medians over epochs, and over
    batches paired with their own step), and its step time against the model-only epoch's of
    the same round, paired batch by batch (the cores the loader's work takes from the model).
    With ``cpu_s`` (the process's CPU seconds per epoch), also the epoch's CPU over the
    model-only epoch's of the same round: the CPU the loader adds, which the machine's load
    does not inflate as it inflates walls (the most the loader can take from the model's cores)."""
    model = loops["model only"][-repeats:]
    out = {}
    for name, epochs in loops.items():
        epochs = epochs[-repeats:]
        outside = [sum(o for o, _ in e) / sum(s for _, s in e) for e in epochs]
        per_batch = [o / s for e in epochs for o, s in e]
        paired = [s / m for e, base in zip(epochs, model) for (_, s), (_, m) in zip(e, base)]
        step_share = [sum(s for _, s in e) / sum(m for _, m in base) for e, base in zip(epochs, model)]
        out[name] = {
            "outside_over_step": float(np.median(outside)),
            "outside_over_step_rounds": [round(v, 4) for v in outside],
            "outside_over_step_batch_median": float(np.median(per_batch)),
            "first_batch_outside_s": float(np.median([e[0][0] for e in epochs])),
            "step_over_model_step": float(np.median(step_share)),
            "step_over_model_step_batch_median": float(np.median(paired)),
            "loop_over_model_step": float(np.median([(1 + o) * r for o, r in zip(outside, step_share)])),
        }
        if cpu_s:
            ratios = np.divide(cpu_s[name][-repeats:], cpu_s["model only"][-repeats:])
            out[name]["cpu_over_model_cpu"] = float(np.median(ratios))
            out[name]["cpu_over_model_cpu_rounds"] = [round(float(v), 4) for v in ratios]
    return out


def _first_batches(loader, warm: int = 5) -> tuple:
    """Seconds of ``loader``'s first batch (compiles, or loads the Numba cache) and the median of
    the next ``warm`` ones, in this process."""
    iterator = iter(loader)
    start = time.perf_counter()
    next(iterator)
    first = time.perf_counter() - start
    times = []
    for _ in range(min(warm, len(loader) - 1)):
        start = time.perf_counter()
        next(iterator)
        times.append(time.perf_counter() - start)
    return first, float(np.median(times)) if times else float("nan")


def _interleaved(contenders: dict, repeats: int) -> dict:
    """Each contender's epoch once per round, in turn; rounds' seconds and edges, medians, and
    per-round paired ratios against the first contender (and the epoch ones against the model)."""
    for run_epoch in contenders.values():  # untimed: warm-up (allocators, the first compile)
        run_epoch()
    seconds = {name: [] for name in contenders}
    edges = {}
    for _ in range(repeats):
        for name, run_epoch in contenders.items():
            start = time.perf_counter()
            edges[name] = run_epoch()
            seconds[name].append(time.perf_counter() - start)
    names = list(contenders)
    out = {}
    for name in names:
        row = {"round_s": [round(s, 4) for s in seconds[name]], "median_s": float(np.median(seconds[name]))}
        row["edges_per_s"] = edges[name] / row["median_s"]
        base = seconds.get("gammagl")  # absent when --epoch-contenders leaves GammaGL's loop out
        row["speedup_vs_gammagl"] = float(np.median(np.divide(base, seconds[name]))) if base else float("nan")
        if "model only" in contenders:
            row["x_model_only"] = float(np.median(np.divide(seconds[name], seconds["model only"])))
        out[name] = row
    return out


_CHILD = """
import sys, time, numpy as np
import gglspeedup as gg
from gglspeedup import datasets
graph = datasets.synthetic_powerlaw(20000, 10, seed=0)
sampler = gg.NeighborSampler(graph, {fanouts}, seed=0)
seeds = np.arange({batch}) % graph.num_nodes
cpu, start = time.process_time(), time.perf_counter()
sampler.sample(seeds)
first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
warm = []
for _ in range(5):
    start = time.perf_counter(); sampler.sample(seeds); warm.append(time.perf_counter() - start)
print(first, first_cpu, float(np.median(warm)))
"""


def _first_call_subprocesses(spec: str, fanouts, batch: int, seed: int) -> dict:
    """``{"cold_s", "cold_cpu_s", "cached_s", "warm_s"}``: the first ``sample`` in a fresh process
    with an empty Numba cache (compiles; wall and CPU seconds, the CPU figure being the one a busy
    machine leaves alone), again with the cache it filled (loads), and a warm call."""
    code = _CHILD.format(fanouts=list(fanouts), batch=batch)
    with tempfile.TemporaryDirectory(prefix="gglspeedup-numba-cache-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        timings = []
        for _ in range(2):
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            timings.append([float(v) for v in done.stdout.split()[-3:]])
    return {"cold_s": timings[0][0], "cold_cpu_s": timings[0][1], "cached_s": timings[1][0], "warm_s": timings[1][2]}


def _print(results: dict, format_table) -> None:
    from ._common import table_columns

    graph, machine = results["graph"], results["machine"]
    print(
        f"bench gammagl: {graph['spec']} ({graph['num_nodes']} nodes, {graph['num_edges']} edges), fanouts "
        f"{results['fanouts']}, batch {results['batch']}, {results['batches']} batches/epoch, "
        f"{results['repeats']} rounds (medians of paired ratios)"
    )
    versions = ", ".join(f"{k} {machine[k]}" for k in ("python", "numpy", "numba", "torch") if k in machine)
    print(
        f"machine: {machine['usable_cores']} usable cores, numba threads {machine.get('numba_threads')} "
        f"({machine.get('numba_threading_layer', '?')}), torch threads {machine.get('torch_threads')}; {versions}"
    )
    build = results["construction_s"]
    print(
        f"construction: gammagl {build['gammagl']:.2f} s, ours {build['ours']:.2f} s "
        f"({build['gammagl'] / build['ours']:.1f}x); ours's first batch {results['first_batch_s']:.3f} s, "
        f"warm {results['warm_batch_s']:.4f} s"
    )
    columns = table_columns(
        "name",
        ("median_s", "s/epoch", ".3f"),
        "edges_per_s_m",
        ("speedup_vs_gammagl", "x gammagl", ".2f"),
        ("x_model_only", "x model only", ".3f"),
    )
    for part, title in (("sample", "sampling"), ("gather", "sampling + tlx.gather(x, n_id)"), ("epoch", "epoch")):
        if part in results:
            rows = [dict(row, name=name, edges_per_s_m=row["edges_per_s"] / 1e6) for name, row in results[part].items()]
            print(f"\n{title}\n" + format_table(rows, columns))
    if "loop" in results:
        columns = table_columns(
            "name",
            ("outside_over_step", "outside / step", ".4f"),
            ("outside_over_step_batch_median", "per batch", ".4f"),
            ("first_batch_outside_s", "first batch outside s", ".3f"),
            ("step_over_model_step", "step / model's", ".3f"),
            ("step_over_model_step_batch_median", "per batch", ".3f"),
            ("loop_over_model_step", "loop / model's steps", ".3f"),
            ("cpu_over_model_cpu", "CPU / model's", ".3f"),
        )
        rows = [dict(row, name=name) for name, row in results["loop"].items()]
        print(
            "\nper batch, in the same loop: time outside the model step (the loader's next + the gather) "
            "over the step time, the step time over the model-only epoch's of the same round, and the "
            "process's CPU seconds over the model-only epoch's (medians)\n" + format_table(rows, columns)
        )
    if "first_call_subprocess" in results:
        first = results["first_call_subprocess"]
        print(
            f"\nfirst sample() in a fresh process: {first['cold_s']:.2f} s ({first['cold_cpu_s']:.2f} s of CPU) "
            "with an empty Numba cache (compiles), "
            f"{first['cached_s']:.2f} s with the cache filled; warm call {first['warm_s'] * 1e3:.1f} ms"
        )
