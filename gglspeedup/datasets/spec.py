"""``--dataset`` strings for demos and benchmarks."""

from __future__ import annotations

import re

__all__ = ["parse_dataset_spec", "parse_count", "parse_powerlaw"]

_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}


def parse_count(text: str, label: str) -> int:
    """``"2000000"``, ``"2M"``, ``"500k"`` -> int (decimal scales); ``label`` names the field in errors."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmb]?)", text.strip().lower().replace("_", ""))
    if match is None:
        raise ValueError(f"{label} must be a number like 2000000 or 2M, got {text!r}")
    return int(round(float(match.group(1)) * _SCALE[match.group(2)]))


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
    if num_nodes < 1 or not avg_degree > 0:
        raise ValueError(f"{label}: NUM_NODES must be >= 1 and AVG_DEGREE > 0")
    seed = parse_count(parts[2], f"{label}: SEED") if len(parts) == 3 else None
    return num_nodes, int(avg_degree) if avg_degree == int(avg_degree) else avg_degree, seed


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

    >>> graph, x, y, split = parse_dataset_spec("powerlaw:1000:8")   # doctest: +SKIP
    """
    if not isinstance(spec, str):
        raise TypeError(f"dataset spec must be a str, got {type(spec).__name__}")
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind in ("cora", "citeseer") and not rest:
        from .planetoid import load

        return load(kind)
    if kind == "powerlaw":
        num_nodes, avg_degree, _ = parse_powerlaw(rest, f"dataset spec {spec!r}")
        from .synthetic import random_split, synthetic_features, synthetic_labels, synthetic_powerlaw

        graph = synthetic_powerlaw(num_nodes, avg_degree, seed=seed)
        y = synthetic_labels(num_nodes, num_classes, seed=seed)
        x = synthetic_features(num_nodes, feature_dim, seed=seed, labels=y)
        return graph, x, y, random_split(num_nodes, seed=seed)
    if kind in ("ogb", "reddit"):
        if not rest:
            raise ValueError(f"dataset spec must be '{kind}:PATH', got {spec!r}")
        from .readers import read_ogb_node, read_reddit

        return read_ogb_node(rest) if kind == "ogb" else read_reddit(rest)
    raise ValueError(
        f"dataset spec must be 'cora', 'citeseer', 'powerlaw:N:D', 'ogb:PATH' or 'reddit:PATH', got {spec!r}"
    )
