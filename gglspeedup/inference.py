"""Layer-wise full-graph inference: every node's output, one layer at a time, without sampling.

A model trained on sampled neighbourhoods is evaluated exactly by running its layers over the
whole graph in turn (DGL's and PyG's ``SAGE.inference``): layer ``l`` is applied to every node,
batch by batch, reading layer ``l - 1``'s output for the batch's full one-hop neighbourhood. Each
node's output is computed once per layer, so the cost is ``num_layers * (num_edges + num_nodes)``
instead of the ``fanout ** num_layers`` blow-up of evaluating every node on its own multi-hop tree.

See DESIGN.md, "Layer-wise inference". Importing this module imports neither a framework nor Numba.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np

from .device import as_device, parse_size
from .validation import check_int

__all__ = ["layerwise", "fused_kind"]


def fused_kind(layer) -> str | None:
    """How :func:`layerwise` runs ``layer``: ``"sage"``, ``"gin"`` or ``"gcn"`` when fused (its
    aggregation one CSR kernel, its linear parts in torch), None when called on blocks.

    >>> from gglspeedup.inference import fused_kind
    >>> fused_kind(lambda block, edge_index: block[1]) is None
    True
    """
    from ._fused_layers import fused_kind as kind

    return kind(layer)


def _check_layers(layers, activation):
    if getattr(layers, "convs", None) is not None:  # a model: its layers
        layers = layers.convs
    try:
        layers = list(layers)
    except TypeError:
        raise TypeError(
            "layers must be a sequence of callables (e.g. model.convs) or a model with .convs, "
            f"got {type(layers).__name__}"
        ) from None
    if not layers:
        raise ValueError("layers must hold at least one layer, got an empty sequence")
    for i, layer in enumerate(layers):
        if not callable(layer):
            raise TypeError(f"layers[{i}] must be callable, got {type(layer).__name__}")
    if activation is not None and not callable(activation):
        raise TypeError(f"activation must be callable or None, got {type(activation).__name__}")
    return layers


def _output_paths(out_dir, num_layers: int) -> list | None:
    """``out_dir/layer{i}.npy`` for every layer, none of which may exist yet: an earlier call's
    output (still mapped by the array it returned) or an input (``x`` mapped from one) would be
    rewritten under its reader."""
    if out_dir is None:
        return None
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path (str or os.PathLike) or None, got {type(out_dir).__name__}")
    if not os.path.isdir(os.fspath(out_dir)):
        raise ValueError(f"out_dir must be an existing directory, got {os.fspath(out_dir)!r}")
    paths = [os.path.join(os.fspath(out_dir), f"layer{i}.npy") for i in range(num_layers)]
    for path in paths:
        if os.path.lexists(path):
            raise FileExistsError(
                f"{path!r} already exists: layerwise writes its outputs to new files only (it would overwrite an "
                "earlier call's output, or an input mapped from it); give a new out_dir or remove the file"
            )
    return paths


def _empty_output(num_nodes: int, dim: int, dtype, paths, layer: int, created: list) -> np.ndarray:
    if paths is None:
        return np.empty((num_nodes, dim), dtype=dtype)
    with open(paths[layer], "xb"):  # claims the name: a file that appeared since the check is not ours
        pass
    created.append(paths[layer])
    return np.lib.format.open_memmap(paths[layer], mode="w+", dtype=dtype, shape=(num_nodes, dim))


def _check_kind(result, what: str) -> None:
    """``TypeError`` naming ``what`` (a layer, the activation) unless ``result`` may be a tensor."""
    if isinstance(result, (list, tuple, dict, str, bytes, int, float, complex)) or result is None:
        raise TypeError(
            f"{what} must return an array or tensor of shape (T, F_out), one row per target, "
            f"got {type(result).__name__}"
        )


def _host_rows(result, what: str) -> np.ndarray:
    """A layer's (or the activation's) output as a host array, or ``TypeError`` naming ``what``."""
    from . import backends
    from .device import array_library

    _check_kind(result, what)
    rows = backends.from_(result)
    if not (isinstance(rows, np.ndarray) or array_library(rows) == "cupy"):
        _check_kind(None, what)
    return _to_host(rows)


def _to_host(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    return array.get()  # sync: a CuPy batch output back to host memory


def layerwise(
    layers,
    graph,
    x,
    *,
    batch_size: int = 4096,
    device="cpu",
    backend: str = "torch",
    activation=None,
    cache_size=0,
    policy=None,
    out_dir=None,
    progress: bool = False,
    fused: bool = True,
):
    """Every node's output of ``layers`` over ``graph``, exactly, one layer at a time.

    For each layer in turn, the nodes are taken in batches of ``batch_size`` consecutive ids; a
    batch's full one-hop neighbourhood (every in-edge: fanout ``-1``, no sampling) is built by the
    :class:`~gglspeedup.NeighborSampler` on ``device``, the previous layer's rows of its nodes are
    gathered by a :class:`~gglspeedup.FeatureStore` (hottest rows cached on the GPU up to
    ``cache_size``), handed to ``backend`` zero-copy, and the layer's output for the batch is
    written to a host table of all nodes, which the next layer reads.

    Fused layers (``fused=True``, the default): a layer :func:`fused_kind` recognises (the
    project's example ``SAGEConv``; PyG's ``SAGEConv`` with mean / sum aggregation, ``GINConv``
    and ``GCNConv`` without ``improved``, by exact type, without forward hooks and with PyG's
    default ``flow``) is not called
    on a block: the batch's neighbour sum or mean is one fused CSR kernel reading the previous
    layer's table in place (every neighbour row read once, no per-edge copy), and the layer's
    own linear parts run in torch on it (GCN's normalisation over the whole graph, as its
    full-graph forward computes it). Its input table must be a float32 host array (``x`` as an
    array, a memory-mapped one too, and every layer's output); otherwise, for any other layer and
    for ``backend`` other than torch, the layer is called on blocks as above. Outputs equal the
    layer's own forward up to float rounding (the sums run in another order).

    Parameters
    ----------
    layers : sequence of callables, or a model with ``.convs``
        Layer ``i`` is called as ``layers[i]((h, h[:T]), edge_index)`` (PyG's bipartite
        convention, which :class:`gglspeedup.examples.torch_models.SAGEConv`, PyG's ``SAGEConv``,
        ``GATConv``, ... follow): ``h`` the previous output of the block's ``N`` nodes (targets
        first), ``edge_index`` int64 (2, E) with sources in ``[0, N)`` and targets in ``[0, T)``;
        it returns the (T, F_out) output of the targets. Call it under ``torch.no_grad()`` and
        with the model in ``eval()`` mode (dropout off) for deterministic outputs.
    graph : CSRGraph or scipy sparse matrix
        Row ``v`` lists the nodes whose messages flow into ``v`` (as for the sampler).
    x : array-like, shape (num_nodes, dim), or FeatureStore
        Input features: anything a :class:`~gglspeedup.FeatureStore` takes (a memory-mapped
        ``.npy`` too), or a store already built (used as it is).
    batch_size : int
        Target nodes per batch (>= 1). Results do not depend on it (up to float rounding of the
        framework's reductions, which it does not reorder for a given node).
    device : str or device
        Where the neighbourhoods are built, the rows gathered and the layers run (``"cpu"``,
        ``"cuda[:i]"``).
    backend : str
        The framework the layers take (``"torch"``, ``"tensorflow"``, ``"paddle"``, ``"jax"``, ...).
    activation : callable, optional
        Applied to every layer's output but the last (e.g. ``torch.relu``), as the model does
        between layers.
    cache_size : int or str
        Device-cache budget in bytes for each intermediate table's store (and for ``x`` when it
        is not a store already); on the CPU it caches rows of memory-mapped tables in RAM.
    policy : None, "degree", "none" or int array
        The stores' cache policy (default ``"degree"``: the most-read rows are the high
        in-degree... and out-degree nodes; see :mod:`gglspeedup.feature.policies`).
    out_dir : path, optional
        Keep every layer's output in ``out_dir/layer{i}.npy`` (memory-mapped) instead of RAM: for
        graphs whose layer outputs do not fit. The files are new: if any of them exists already
        (an earlier call's output, which the array it returned still maps, or an input ``x``
        mapped from it) the call raises ``FileExistsError`` before any work. They are left there
        (removed again when the call fails).
    progress : bool
        Report progress on stderr (a ``tqdm`` bar when tqdm is installed, else a line per layer).
    fused : bool
        Run the layers :func:`fused_kind` recognises fused (default); False calls every layer on
        blocks. ``cache_size`` and ``policy`` apply to the layers run on blocks: a fused layer
        reads its table in place (on a GPU, the whole table copied to the device once per layer).

    Returns
    -------
    np.ndarray, shape (num_nodes, F_out)
        The last layer's output for every node, in host memory (a ``np.memmap`` with
        ``out_dir``). A graph without nodes gives ``(0, F_out)``: every layer runs once on an
        empty block (fused on no rows). Memory: besides the graph and ``x``, at most two layer tables at once (the
        one read and the one written; each freed once the next layer is done) plus the cache
        budget and one batch's block (for a fused layer, the batch's aggregate and outputs).

    Raises
    ------
    TypeError
        ``layers`` not callables, ``activation`` not callable, ``x`` not an array, tensor, store or
        list of rows (a path, ``None``), ``batch_size`` not an int, ``fused``
        or ``progress`` not a bool, a layer (or the activation) returning something other than an
        array or tensor (a list, a tuple).
    ValueError
        no layers, ``batch_size < 1``, a bipartite graph, ``x`` rows differing from the graph's nodes, a
        corrupt neighbour id (a graph loaded without ``verify``), a layer returning the wrong number of
        rows or not a 2-D array, or a later batch of other columns or dtype.
    FileExistsError
        ``out_dir/layer{i}.npy`` already exists for some layer ``i``.

    Examples
    --------
    >>> import numpy as np, torch, gglspeedup as gg                         # doctest: +SKIP
    >>> from gglspeedup.examples.torch_models import SAGE                   # doctest: +SKIP
    >>> model = SAGE(16, 32, 4).eval()                                      # doctest: +SKIP
    >>> with torch.no_grad():                                               # doctest: +SKIP
    ...     out = gg.inference.layerwise(model.convs, graph, x, activation=torch.relu)
    """
    from .feature import FeatureStore
    from .graph import as_csr_graph

    layers = _check_layers(layers, activation)
    if not isinstance(fused, (bool, np.bool_)):
        raise TypeError(f"fused must be a bool, got {type(fused).__name__}")
    if not isinstance(progress, (bool, np.bool_)):  # progress="no" would report
        raise TypeError(f"progress must be a bool, got {type(progress).__name__}")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    device = as_device(device).check_available()  # the fused path reached for CuPy before any sampler checked
    cache_size = parse_size(cache_size, "cache_size")
    graph = as_csr_graph(graph)
    num_nodes = graph.num_nodes
    if graph.num_src_nodes != num_nodes:  # the sources would index rows x does not have
        raise ValueError(
            f"graph is bipartite (num_src_nodes = {graph.num_src_nodes}, num_nodes = {num_nodes}): layer-wise "
            "inference reads every layer's output rows as the next layer's sources, so it needs a square graph"
        )
    paths = _output_paths(out_dir, len(layers))
    shape = getattr(x, "shape", None)
    if shape is None and not isinstance(x, (list, tuple)):  # len() of a path or a dict is no row count
        hint = " (a path: pass np.load(path, mmap_mode='r'))" if isinstance(x, (str, os.PathLike)) else ""
        raise TypeError(
            f"x must be an array or tensor (num_nodes, dim), a FeatureStore or a list of rows, got "
            f"{type(x).__name__}{hint}"
        )
    rows = len(x) if shape is None else (int(shape[0]) if len(shape) else None)
    if rows != num_nodes:
        raise ValueError(f"x must have one row per graph node ({num_nodes}), got {rows} rows")
    # x itself when a fused first layer reads it in place; a store (cache, pinning) otherwise
    store = (
        x
        if isinstance(x, FeatureStore) or (fused and _fused_input(x))
        else _store(x, device, cache_size, policy, graph)
    )
    created: list = []  # files this call made: removed again if it fails
    try:
        return _run_layers(layers, graph, store, batch_size, device, backend, activation, cache_size, policy, paths,
                           created, _Progress(progress, num_nodes, len(layers)), bool(fused))  # fmt: skip
    except BaseException:
        for path in created:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _run_layers(layers, graph, store, batch_size, device, backend, activation, cache_size, policy, paths, created, bar,
                fused):  # fmt: skip
    num_nodes = graph.num_nodes
    sampler = graph_arrays = None
    previous = None
    # A graph without nodes still runs each layer once, on an empty block (a fused layer on no rows,
    # as GCNConv cannot take a block): the next layer reads a (0, F) table, the output has the last
    # layer's width.
    starts = range(0, num_nodes, batch_size) if num_nodes else [0]
    for index, layer in enumerate(layers):
        last = index == len(layers) - 1
        table = None
        started = time.perf_counter()
        kind = _fused_kind(layer, backend) if fused else None
        if kind is not None and _fused_input(store):
            from ._fused_layers import DeviceGraph, fused_batches

            graph_arrays = graph_arrays or DeviceGraph(graph, device)
            table_in = device.xp.asarray(store)  # on a GPU: the whole table read, copied once per layer
            batches = fused_batches(kind, layer, graph_arrays, table_in, starts, batch_size, num_nodes)
        else:
            if not _is_store(store):
                store = _store(store, device, cache_size, policy, graph)
            sampler = sampler or _block_sampler(graph, device)
            batches = _block_batches(layer, sampler, store, backend, starts, num_nodes, batch_size)
        for start, count, result in batches:
            what = f"layers[{index}]"
            if not last and activation is not None:
                _check_kind(result, what)  # named before the activation fails on it
                result, what = activation(result), "activation"
            rows = _host_rows(result, what)
            if rows.ndim != 2 or rows.shape[0] != count:
                raise ValueError(
                    f"layers[{index}] must return a 2-D output with one row per target ({count}), "
                    f"got shape {tuple(rows.shape)}"
                )
            if table is None:
                table = _empty_output(num_nodes, rows.shape[1], rows.dtype, paths, index, created)
            elif rows.shape[1] != table.shape[1]:
                raise ValueError(f"layers[{index}] returned {rows.shape[1]} columns, earlier batches {table.shape[1]}")
            elif rows.dtype != table.dtype:  # the table has the first batch's dtype: 1.5 into int64 would be 1
                raise ValueError(f"layers[{index}] returned dtype {rows.dtype}, earlier batches {table.dtype}")
            table[start : start + count] = rows
            bar.update(index, count)
        bar.layer_done(index, time.perf_counter() - started)
        batches = None
        del previous  # the table the store read; the store below replaces it
        previous = table
        store = table  # the next layer's input: read in place when fused, else through a store
    bar.close()
    store = None  # the last store read the second-to-last table: free both before returning
    return previous


def _fused_kind(layer, backend):
    return fused_kind(layer) if backend == "torch" else None


def _fused_input(store) -> bool:
    """Whether a layer's input is a table the fused kernel reads in place (a float32 host array)."""
    from ._fused_layers import fusable_table

    return fusable_table(store)


def _is_store(store) -> bool:
    from .feature import FeatureStore

    return isinstance(store, FeatureStore)


def _store(table, device, cache_size, policy, graph):
    from .feature import FeatureStore

    return FeatureStore(table, device, cache_size, _policy(policy), graph)


def _block_sampler(graph, device):
    from .sampling import NeighborSampler

    return NeighborSampler(graph, [-1], device=device)


def _block_batches(layer, sampler, store, backend, starts, num_nodes, batch_size):
    """``(start, count, output)`` of ``layer`` called on each batch's block (the unfused path)."""
    from . import backends

    for start in starts:
        seeds = np.arange(start, min(start + batch_size, num_nodes), dtype=np.int64)
        n_id, adjs = sampler.sample(seeds, key=0)
        h = backends.to(backend, store.gather(n_id, check=False))
        edge_index = backends.to(backend, adjs[0].edge_index)
        yield start, len(seeds), layer((h, h[: len(seeds)]), edge_index)


def _policy(policy):
    return "degree" if policy is None else policy


class _Progress:
    """A tqdm bar over nodes per layer when tqdm imports, else a line per layer on stderr."""

    def __init__(self, enabled: bool, num_nodes: int, num_layers: int):
        self.enabled, self.num_nodes, self.num_layers, self.bar = bool(enabled), num_nodes, num_layers, None
        if self.enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.tqdm = None
            else:
                self.tqdm = tqdm

    def update(self, layer: int, count: int) -> None:
        if not self.enabled or self.tqdm is None:
            return
        if self.bar is None:
            self.bar = self.tqdm(total=self.num_nodes, desc=f"layer {layer + 1}/{self.num_layers}", unit="node")
        self.bar.update(count)

    def layer_done(self, layer: int, seconds: float) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        else:
            rate = self.num_nodes / seconds if seconds > 0 else float("inf")
            print(f"layer {layer + 1}/{self.num_layers}: {self.num_nodes} nodes, {rate:,.0f} nodes/s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
