"""Pickling for the attention structures that hold a lock and caches made on demand.

A :class:`~.pooling.batch.GraphBatch`, a :class:`~.sequence.patterns.SequencePattern` and an
:class:`~.sequence.graph.AttentionGraph` guard their lazily made parts with a ``threading.Lock``,
which neither ``pickle`` nor ``copy.deepcopy`` can copy (so a model holding one could not be deep
copied or sent to another process). Each names, once, the fields to leave out and how to make them
again where the object is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RemadeOnLoad"]


class RemadeOnLoad:
    """Mixin: pickle / ``copy`` every attribute but those named in ``remake``, which are made again
    (``remake[name]()``) on loading.

    ``remake`` is given as a class keyword: the lock, and caches whose contents are a pure function
    of the rest (rebuilt on first use where the object is loaded, instead of copied)::

        class GraphBatch(RemadeOnLoad, remake={"_lock": threading.Lock, "_placed": dict}):
            ...
    """

    _remade_on_load: tuple[tuple[str, Callable[[], Any]], ...] = ()

    def __init_subclass__(cls, remake: dict[str, Callable[[], Any]] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if remake is not None:
            cls._remade_on_load = tuple(remake.items())

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name, _ in self._remade_on_load:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name, make in self._remade_on_load:
            setattr(self, name, make())
