"""PyG's remote-backend surface over gglspeedup: PyG's own loaders, gglspeedup's sampler and stores.

PyG's documented way to plug in a faster backend ("Scaling Up GNNs via Remote Backends") is a
``torch_geometric.data.FeatureStore``, a ``torch_geometric.data.GraphStore`` and a
``torch_geometric.sampler.BaseSampler`` handed to PyG's ``NodeLoader`` / ``LinkLoader``. This
subpackage is those three over gglspeedup, plus two conveniences:

- :class:`FeatureStore`: feature rows from :class:`gglspeedup.FeatureStore` /
  :class:`gglspeedup.HeteroFeatureStore` (device cache, host tier, ``stats()``), handed to torch
  zero-copy;
- :class:`GraphStore`: a :class:`~gglspeedup.CSRGraph` or :class:`~gglspeedup.HeteroGraph` answering
  PyG's edge-layout requests (CSC without a copy of int64 arrays, int32 ones widened once: a
  CSRGraph row ``v`` lists the sources of the edges into ``v``, PyG's CSC with ``colptr = indptr``
  and ``row = indices``);
- :class:`Sampler`: ``sample_from_nodes`` / ``sample_from_edges`` (PyG's ``NegativeSampling``,
  binary and triplet) over :class:`~gglspeedup.NeighborSampler` /
  :class:`~gglspeedup.HeteroNeighborSampler`, returning PyG's ``SamplerOutput`` /
  ``HeteroSamplerOutput`` filled as PyG's own ``NeighborSampler`` fills them;
- :class:`NeighborSampler`: :class:`Sampler` taking PyG's ``NeighborSampler`` argument list, to
  hand to PyG's own loaders (``neighbor_sampler=``);
- :class:`NeighborLoader`, :class:`LinkNeighborLoader`: PyG's ``NodeLoader`` / ``LinkLoader``
  driven by :class:`Sampler`, taking PyG's usual arguments and yielding ``Data`` / ``HeteroData``.

``import gglspeedup`` never imports this subpackage (nor PyG); ``import gglspeedup.pyg`` needs
``torch_geometric`` (``pip install gglspeedup[pyg]``) and raises ``ImportError`` naming that extra
without it.

Example, PyG's remote-backend recipe with gglspeedup underneath::

    import torch
    import gglspeedup as gg
    from gglspeedup import pyg
    from torch_geometric.loader import NodeLoader

    graph, x, y, split = gg.datasets.load("cora")
    feature_store = pyg.FeatureStore({"x": x, "y": y})
    graph_store = pyg.GraphStore(graph)
    sampler = pyg.Sampler((feature_store, graph_store), num_neighbors=[10, 10])
    loader = NodeLoader(data=(feature_store, graph_store), node_sampler=sampler,
                        input_nodes=torch.from_numpy(split["train"]), batch_size=64, shuffle=True)
    for batch in loader:            # torch_geometric.data.Data: x, y, edge_index, n_id, e_id, batch_size
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
"""

from __future__ import annotations

EXTRA = "pyg"

try:
    import torch_geometric  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "gglspeedup.pyg needs torch_geometric (PyG), which is not installed: pip install gglspeedup[pyg]"
    ) from error

from .feature_store import FeatureStore  # noqa: E402
from .graph_store import GraphStore  # noqa: E402
from .loaders import LinkNeighborLoader, NeighborLoader  # noqa: E402
from .neighbor_sampler import NeighborSampler  # noqa: E402
from .outputs import hetero_sampler_output, sampler_output  # noqa: E402
from .sampler import Sampler  # noqa: E402

__all__ = [
    "FeatureStore",
    "GraphStore",
    "Sampler",
    "NeighborSampler",
    "NeighborLoader",
    "LinkNeighborLoader",
    "sampler_output",
    "hetero_sampler_output",
    "EXTRA",
]
