"""Multi-hop neighbour sampling (see DESIGN.md, "Sampling" and "Typed graphs")."""

from .types import Adj, HeteroLinkSampleOutput, HeteroSampleOutput, LinkSampleOutput, SampleOutput

__all__ = [
    "Adj",
    "SampleOutput",
    "LinkSampleOutput",
    "HeteroSampleOutput",
    "HeteroLinkSampleOutput",
    "NeighborSampler",
    "HeteroNeighborSampler",
]


def __getattr__(name):
    if name == "NeighborSampler":
        from .sampler import NeighborSampler

        return NeighborSampler
    if name == "HeteroNeighborSampler":
        from .hetero import HeteroNeighborSampler

        return HeteroNeighborSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
