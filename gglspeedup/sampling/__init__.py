"""Multi-hop neighbour sampling (see DESIGN.md, "Sampling")."""

from .types import Adj, LinkSampleOutput, SampleOutput

__all__ = ["Adj", "SampleOutput", "LinkSampleOutput", "NeighborSampler"]


def __getattr__(name):
    if name == "NeighborSampler":
        from .sampler import NeighborSampler

        return NeighborSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
