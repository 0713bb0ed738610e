"""One lock for the feature and label stores' statistics counters.

A loader with ``workers > 1`` gathers from several producer threads at once, and
``self._lookups += n`` on an attribute is a read, an add and a write that another thread may
interleave (an update lost). The counters are statistics (lookups, calls, hits), so one
process-wide lock keeps them exact: it is held for a few additions per gather, never around a
kernel or a request, so the threads do not wait on each other's work, and no store holds a lock
of its own (stores stay picklable).
"""

from __future__ import annotations

import threading

__all__ = ["COUNTS_LOCK"]

COUNTS_LOCK = threading.Lock()
