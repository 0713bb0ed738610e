"""``--dataset`` strings for demos and benchmarks."""

from __future__ import annotations

import re

__all__ = ["parse_dataset_spec", "parse_count"]

_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}


def parse_count(text: str, label: str) -> int:
    """``"2000000"``, ``"2M"``, ``"500k"`` -> int (decimal scales); ``label`` names the field in errors."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmb]?)", text.strip().lower().replace("_", ""))
    if match is None:
        raise ValueError(f"{label} must be a number like 2000000 or 2M, got {text!r}")
    return int(round(float(match.group(1)) * _SCALE[match.group(2)]))


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
        parts = rest.split(":")
        if len(parts) != 2:
            raise ValueError(f"dataset spec must be 'powerlaw:NUM_NODES:AVG_DEGREE', got {spec!r}")
        num_nodes = parse_count(parts[0], f"NUM_NODES in dataset spec {spec!r}")
        try:
            avg_degree = float(parts[1])
        except ValueError:
            raise ValueError(f"AVG_DEGREE in dataset spec {spec!r} must be a number, got {parts[1]!r}") from None
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
