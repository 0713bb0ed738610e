"""Dataset strings (``--dataset`` of the demos, ``--graph`` of the benchmarks): one grammar.

``cora`` | ``citeseer`` | ``powerlaw:NUM_NODES:AVG_DEGREE[:SEED]`` | ``ogb:PATH`` | ``reddit:PATH``
| ``file:PATH``, and the typed datasets ``wordnet`` | ``igbh-like:NUM_PAPERS[:SEED]``.
:func:`parse_spec` reads a string into a :class:`DatasetSpec`; :func:`load_spec` loads the dataset
it names, :func:`load_spec_graph` only its (untyped) graph and :func:`load_spec_typed_graph` only
its typed graph. Two front ends use them: :func:`parse_dataset_spec` (a full dataset: graph,
features, labels, split; the powerlaw graph's seed comes from the caller) and
``gglspeedup.bench``'s ``--graph`` (a graph only, so ``file:PATH`` and an explicit powerlaw
``SEED`` are allowed there). A typed dataset's graph is a :class:`~gglspeedup.HeteroGraph` and
its ``x``, ``y`` and ``split`` are dicts per node type; read as a ``--graph`` it is untyped
(``HeteroGraph.to_homogeneous``).
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from typing import NamedTuple

__all__ = [
    "DatasetSpec",
    "parse_spec",
    "load_spec",
    "load_spec_graph",
    "load_spec_typed_graph",
    "parse_dataset_spec",
    "parse_count",
    "parse_powerlaw",
    "DATASET_KINDS",
    "TYPED_KINDS",
    "GRAPH_KINDS",
    "GRAPH_SPEC_HELP",
]

TYPED_KINDS = ("wordnet", "igbh-like")  # typed datasets (HeteroGraph, dicts per node type)
DATASET_KINDS = ("cora", "citeseer", "powerlaw", "ogb", "reddit", *TYPED_KINDS)  # full datasets
GRAPH_KINDS = (*DATASET_KINDS, "file", "papers-like")  # graphs only: a saved CSRGraph; the out-of-core papers shape
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}
GRAPH_SPEC_HELP = (
    "graph to read: 'powerlaw:NUM_NODES:AVG_DEGREE[:SEED]' (synthetic power-law, "
    "gglspeedup.datasets.synthetic_powerlaw; NUM_NODES may read 2M or 500k), 'cora', 'citeseer' "
    "(bundled), 'ogb:PATH', 'reddit:PATH' (datasets on disk), 'file:PATH' (a CSRGraph saved "
    "with CSRGraph.save), or a typed graph read untyped: 'wordnet' (bundled), "
    "'igbh-like:NUM_PAPERS[:SEED]' (synthetic IGBH-shaped), or 'papers-like[:NUM_NODES[:SEED]]' "
    "(ogbn-papers100M's shape, 111M nodes and 14.6 edges per node by default, built out of core "
    "into $GGLSPEEDUP_CACHE, or ~/.cache/gglspeedup, once)"
)
_TYPED_FORMS = "typed datasets: 'wordnet' or 'igbh-like:NUM_PAPERS[:SEED]'"


class DatasetSpec(NamedTuple):
    """A parsed dataset string: ``kind`` and the fields that kind takes (others ``None``)."""

    kind: str  # one of GRAPH_KINDS
    text: str  # the string as given
    path: str | None = None  # ogb, reddit, file
    num_nodes: int | None = None  # powerlaw; igbh-like: the number of papers
    avg_degree: float | None = None  # powerlaw
    seed: int | None = None  # powerlaw, igbh-like: when the string names one


def parse_count(text: str, label: str) -> int:
    """``"2000000"``, ``"2M"``, ``"500k"`` -> int (decimal scales); ``label`` names the field in errors."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmb]?)", text.strip().lower().replace("_", ""))
    if match is None:
        raise ValueError(f"{label} must be a number like 2000000 or 2M, got {text!r}")
    value = Decimal(match.group(1)) * _SCALE[match.group(2)]  # exact: 1.1M is 1100000, not 1100000.0000000002
    if value != value.to_integral_value():  # not rounded: "1.5" nodes or SEED "2.7" is a typo
        raise ValueError(f"{label} must be a whole number, got {text!r}")
    return int(value)


def parse_powerlaw(rest: str, label: str, *, with_seed: bool = False) -> tuple:
    """``"N:D"`` (or ``"N:D:SEED"`` when ``with_seed``) of a ``powerlaw:`` spec -> ``(N, D, seed)``.

    ``N`` may be written ``2M`` or ``500k``; ``D`` is a positive number, returned as an int when it
    is whole; ``seed`` is ``None`` when not given. ``label`` names the spec in errors.
    """
    form = "powerlaw:NUM_NODES:AVG_DEGREE" + ("[:SEED]" if with_seed else "")
    parts = rest.split(":") if rest else []
    if len(parts) not in ((2, 3) if with_seed else (2,)):
        raise ValueError(f"{label}: expected {form!r}")
    num_nodes = parse_count(parts[0], f"{label}: NUM_NODES")
    try:
        avg_degree = float(parts[1])
    except ValueError:
        raise ValueError(f"{label}: AVG_DEGREE must be a number, got {parts[1]!r}") from None
    if num_nodes < 1 or not 0 < avg_degree < math.inf:  # int(inf) below is an OverflowError
        raise ValueError(f"{label}: NUM_NODES must be >= 1 and AVG_DEGREE > 0 (and finite)")
    seed = parse_count(parts[2], f"{label}: SEED") if len(parts) == 3 else None
    return num_nodes, int(avg_degree) if avg_degree == int(avg_degree) else avg_degree, seed


def parse_spec(text: str, *, graph_only: bool = False) -> DatasetSpec:
    """Read a dataset string into a :class:`DatasetSpec` (nothing is loaded).

    ``graph_only=False`` reads a ``--dataset`` (full datasets: ``DATASET_KINDS``, no powerlaw
    ``SEED``); ``graph_only=True`` reads a benchmark's ``--graph`` (``GRAPH_KINDS``: ``file:PATH``
    too, and ``powerlaw:N:D:SEED``; a ``file:`` path must exist). ``igbh-like:NUM_PAPERS[:SEED]``
    takes its ``SEED`` in both. Errors are ``ValueError`` (``TypeError`` for a non-string) naming
    the string and the forms expected.

    >>> parse_spec("powerlaw:2M:32")
    DatasetSpec(kind='powerlaw', text='powerlaw:2M:32', path=None, num_nodes=2000000, avg_degree=32, seed=None)
    >>> parse_spec("igbh-like:2M:1")
    DatasetSpec(kind='igbh-like', text='igbh-like:2M:1', path=None, num_nodes=2000000, avg_degree=None, seed=1)
    """
    label = f"--graph {text!r}" if graph_only else f"dataset spec {text!r}"
    if not isinstance(text, str):
        raise TypeError(f"dataset spec must be a str, got {type(text).__name__}")
    if graph_only and not text.strip():
        raise ValueError(f"--graph must be a non-empty string; {GRAPH_SPEC_HELP}")
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind not in (GRAPH_KINDS if graph_only else DATASET_KINDS):
        if graph_only:
            raise ValueError(f"{label} is not understood; {GRAPH_SPEC_HELP}")
        raise ValueError(
            f"dataset spec must be 'cora', 'citeseer', 'powerlaw:N:D', 'ogb:PATH' or 'reddit:PATH', got {text!r} "
            f"({_TYPED_FORMS})"
        )
    if kind in ("cora", "citeseer", "wordnet"):
        if rest:
            if graph_only:
                raise ValueError(f"{label}: {kind!r} takes no arguments")
            raise ValueError(f"dataset spec must be {kind!r} (no arguments), got {text!r}")
        return DatasetSpec(kind, text)
    if kind == "powerlaw":
        num_nodes, avg_degree, seed = parse_powerlaw(rest, label, with_seed=graph_only)
        return DatasetSpec(kind, text, num_nodes=num_nodes, avg_degree=avg_degree, seed=seed)
    if kind == "papers-like":
        from .papers_like import PAPERS_NODES

        parts = rest.split(":") if rest else []
        if len(parts) > 2:
            raise ValueError(f"{label}: expected 'papers-like[:NUM_NODES[:SEED]]'")
        num_nodes = parse_count(parts[0], f"{label}: NUM_NODES") if parts else PAPERS_NODES
        if num_nodes < 1:
            raise ValueError(f"{label}: NUM_NODES must be >= 1")
        seed = parse_count(parts[1], f"{label}: SEED") if len(parts) == 2 else None
        return DatasetSpec(kind, text, num_nodes=num_nodes, seed=seed)
    if kind == "igbh-like":
        parts = rest.split(":") if rest else []
        if len(parts) not in (1, 2):
            raise ValueError(f"{label}: expected 'igbh-like:NUM_PAPERS[:SEED]'")
        num_papers = parse_count(parts[0], f"{label}: NUM_PAPERS")
        if num_papers < 1:
            raise ValueError(f"{label}: NUM_PAPERS must be >= 1")
        seed = parse_count(parts[1], f"{label}: SEED") if len(parts) == 2 else None
        return DatasetSpec(kind, text, num_nodes=num_papers, seed=seed)
    if not rest:
        if graph_only:
            raise ValueError(f"{label}: expected '{kind}:PATH'")
        raise ValueError(f"dataset spec must be '{kind}:PATH', got {text!r}")
    if kind == "file" and not os.path.exists(rest):
        raise ValueError(f"{label}: no such file {rest!r}")
    return DatasetSpec(kind, text, path=rest)


def load_spec_graph(spec: DatasetSpec):
    """The :class:`~gglspeedup.CSRGraph` of a parsed spec (a powerlaw graph with ``spec.seed``, 0
    when the string names none; a typed dataset's graph untyped, by ``HeteroGraph.to_homogeneous``).
    A dataset folder without the dataset's files raises ``ValueError`` naming the ``--graph`` string."""
    if spec.kind == "file":
        from ..graph import CSRGraph

        return CSRGraph.load(spec.path)
    if spec.kind == "powerlaw":
        from .synthetic import synthetic_powerlaw

        return synthetic_powerlaw(spec.num_nodes, spec.avg_degree, seed=spec.seed or 0)
    if spec.kind == "papers-like":
        from .papers_like import load_papers_like

        return load_papers_like(spec.num_nodes, spec.seed or 0)[0]
    if spec.kind in TYPED_KINDS:
        return load_spec_typed_graph(spec).to_homogeneous()[0]
    try:
        return load_spec(spec)[0]
    except FileNotFoundError as error:  # ogb:PATH / reddit:PATH without the dataset's files
        raise ValueError(f"--graph {spec.text!r}: {error}") from None


def load_spec_typed_graph(spec):
    """The :class:`~gglspeedup.HeteroGraph` of a typed dataset string or parsed spec: ``wordnet``,
    ``igbh-like:NUM_PAPERS[:SEED]`` (seed 0 when the string names none) or ``file:PATH`` (a graph
    saved with ``HeteroGraph.save``). A string is read as a ``--graph`` (:func:`parse_spec` with
    ``graph_only=True``); an untyped kind raises ``ValueError``.

    >>> load_spec_typed_graph("igbh-like:1000").num_nodes
    {'paper': 1000, 'author': 1029, 'institute': 1, 'fos': 3}
    """
    if isinstance(spec, str):
        spec = parse_spec(spec, graph_only=True)
    elif not isinstance(spec, DatasetSpec):
        raise TypeError(f"spec must be a dataset string or a DatasetSpec, got {type(spec).__name__}")
    if spec.kind == "wordnet":
        from .wordnet import load_wordnet

        return load_wordnet()[0]
    if spec.kind == "igbh-like":
        from .synthetic_hetero import synthetic_igbh

        return synthetic_igbh(spec.num_nodes, seed=spec.seed or 0)
    if spec.kind == "file":
        from ..heterograph import HeteroGraph

        return HeteroGraph.load(spec.path)
    raise ValueError(f"{spec.text!r} names an untyped graph ({spec.kind}); {_TYPED_FORMS}, or 'file:PATH'")


def load_spec(spec: DatasetSpec, *, feature_dim: int = 128, num_classes: int = 16, seed: int = 0):
    """The ``(graph, x, y, split)`` of a parsed spec (see :func:`parse_dataset_spec`)."""
    from ..validation import check_int

    # named as the caller wrote them ("dim must be >= 1" was), and before a synthetic graph is built
    feature_dim = check_int("feature_dim", feature_dim, minimum=1)
    num_classes = check_int("num_classes", num_classes, minimum=1)
    if spec.kind in ("cora", "citeseer"):
        from .planetoid import load

        return load(spec.kind)
    if spec.kind == "powerlaw":
        from .synthetic import random_split, synthetic_features, synthetic_labels, synthetic_powerlaw

        seed = seed if spec.seed is None else spec.seed
        graph = synthetic_powerlaw(spec.num_nodes, spec.avg_degree, seed=seed)
        y = synthetic_labels(spec.num_nodes, num_classes, seed=seed)
        x = synthetic_features(spec.num_nodes, feature_dim, seed=seed, labels=y)
        return graph, x, y, random_split(spec.num_nodes, seed=seed)
    if spec.kind == "wordnet":
        from .wordnet import load_wordnet

        return load_wordnet()
    if spec.kind == "igbh-like":
        from .synthetic_hetero import load_igbh_like

        seed = seed if spec.seed is None else spec.seed
        return load_igbh_like(spec.num_nodes, seed, feature_dim=feature_dim, num_classes=num_classes)
    if spec.kind in ("ogb", "reddit"):
        from .readers import read_ogb_node, read_reddit

        return read_ogb_node(spec.path) if spec.kind == "ogb" else read_reddit(spec.path)
    raise ValueError(f"{spec.text!r} names a graph without features or labels ({spec.kind}:); use a full dataset")


def parse_dataset_spec(spec: str, *, feature_dim: int = 128, num_classes: int = 16, seed: int = 0):
    """Load the dataset a ``--dataset`` string names: ``(graph, x, y, split)``.

    ``"cora"``, ``"citeseer"``
        the bundled Planetoid graphs (:func:`load`).
    ``"powerlaw:N:D"``
        :func:`synthetic_powerlaw` with ``N`` nodes and mean degree ``D`` (``N`` may be written
        ``2M`` or ``500k``, decimal), ``feature_dim`` float32 features carrying the signal of
        ``num_classes`` uniform labels (:func:`synthetic_features`, :func:`synthetic_labels`),
        and a random 60/20/20 split; all deterministic for ``seed``.
    ``"ogb:PATH"``
        :func:`read_ogb_node` on an OGB dataset folder (undirected, both edge directions).
    ``"reddit:PATH"``
        :func:`read_reddit` on a folder with DGL's Reddit files.
    ``"wordnet"``
        :func:`load_wordnet`, typed: a ``HeteroGraph`` and dicts per node type.
    ``"igbh-like:N[:SEED]"``
        :func:`load_igbh_like`, typed: :func:`synthetic_igbh` with ``N`` papers, ``feature_dim``
        features for every node type, ``num_classes`` labels and a 60/20/20 split for papers;
        ``SEED`` (default: ``seed``) seeds them all.

    >>> graph, x, y, split = parse_dataset_spec("powerlaw:1000:8")   # doctest: +SKIP
    """
    return load_spec(parse_spec(spec), feature_dim=feature_dim, num_classes=num_classes, seed=seed)
