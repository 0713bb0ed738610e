"""Mini-batch node loader: shuffle seeds, sample and gather ahead of the training loop.

>>> loader = NodeLoader(sampler, features, split["train"], 512, labels=y, backend="torch")  # doctest: +SKIP
>>> for epoch in range(10):                                                                 # doctest: +SKIP
...     for x, y_batch, adjs, n_id, batch_size in loader:
...         out = model(x, adjs)                      # adjs outermost hop first
...         loss = F.cross_entropy(out, y_batch)

A background thread samples and gathers the next ``prefetch`` batches (on a GPU inside its own
CUDA stream) while the caller trains on the current one. Shuffling is keyed by ``(seed, epoch)``
and every batch's sampler key by ``(epoch, batch index)``, so two runs with the same seeds see the
same batches. An exception raised while preparing a batch is re-raised in the caller's loop.
Host feature rows are gathered into a small pool of recycled buffers (``reuse_buffers``): a
buffer is reused once the caller has dropped every batch that shared it, never before.

:class:`LinkLoader` does the same over a (2, E) array of node pairs: each batch is
``sampler.sample_links`` of the next pairs (negatives, exclusion of the batch's own edges from
the neighbourhood) with the feature rows of its ``n_id``.

Both run typed over a :class:`~gglspeedup.HeteroNeighborSampler` (seeds a dict node type -> ids;
pairs of one ``edge_type``; features a dict node type -> rows or a ``HeteroFeatureStore``) and
yield :class:`HeteroBatch` / :class:`HeteroLinkBatch` (``x``, ``n_id``, ``y`` dicts per node type,
``adjs`` a list of dicts per edge type), with the same keys, shuffling, prefetching and stats:

>>> loader = NodeLoader(sampler, features, {"paper": train_ids}, 512, labels={"paper": y})  # doctest: +SKIP
>>> for batch in loader:                                                                    # doctest: +SKIP
...     out = model(batch.x, batch.adjs)["paper"][: batch.batch_size["paper"]]
...     loss = F.cross_entropy(out, batch.y["paper"])

:class:`BaseLoader` is the machinery both share (shuffling, keys, prefetching, buffer pool, stats),
public for loaders built elsewhere in the package (the GammaGL drop-ins).
"""

from ._base import BaseLoader
from .hetero import HeteroBatch, HeteroLinkBatch
from .link import LinkBatch, LinkLoader
from .node import Batch, NodeLoader

__all__ = ["Batch", "NodeLoader", "LinkBatch", "LinkLoader", "HeteroBatch", "HeteroLinkBatch", "BaseLoader"]
