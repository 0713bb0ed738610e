"""The loaders' background producers: threads prepare batches into bounded queues.

With ``workers`` producer threads, thread ``w`` prepares batches ``w, w + workers, ...`` into a
queue of its own, and the caller reads the queues in turn, so batches arrive in order and each is
exactly the batch one producer would have made (it depends only on its index). The threads hold
no reference to the iterator, so an iterator the caller abandons is garbage-collected and its
``__del__`` stops them; an exception raised while preparing a batch is handed to the caller's loop
and re-raised there, in the batch's place.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time

from .._interrupt import StopFlag, stop_scope
from .._launch import synchronize

__all__ = ["PrefetchIterator"]

_POLL_S = 0.05  # how often a blocked producer / consumer re-checks for shutdown


def _device_and_stream(sampler):
    """``(device context, stream context)`` for the producer thread: on a real GPU the sampler's
    device and a non-blocking CuPy stream created on it (a CuPy stream belongs to the device
    current at its creation); null contexts otherwise."""
    device = getattr(sampler, "device", None)
    if device is None or not getattr(device, "is_cuda", False) or getattr(device, "simulated", False):
        return contextlib.nullcontext(), contextlib.nullcontext(None)
    import cupy

    with device:
        stream = cupy.cuda.Stream(non_blocking=True)
    return device, stream


def _put(items: queue.Queue, stop: threading.Event, item) -> bool:
    while not stop.is_set():
        try:
            items.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _produce(
    loader, epoch: int, slices: list, first: int, step: int, items: queue.Queue, stop: threading.Event, flag: StopFlag
) -> None:
    """A producer thread's body: batches ``first, first + step, ...`` of ``slices`` into ``items``.
    It holds no reference to the iterator, so an iterator the caller abandons is
    garbage-collected, and its ``__del__`` stops this thread. ``flag`` is set with ``stop``: the
    long kernel calls of a batch in progress poll it (gglspeedup._interrupt), so closing the
    iterator ends the batch within a block of work, not at its end."""
    try:
        threads = getattr(loader, "producer_threads", None)
        if threads:  # Numba's thread count is per calling thread: this one only, not the trainer's
            import numba

            numba.set_num_threads(min(int(threads), numba.config.NUMBA_NUM_THREADS))
        nice = getattr(loader, "producer_nice", None)
        if nice and hasattr(os, "setpriority"):  # Linux: this thread only; it ends with the epoch
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + nice)
        device, stream = _device_and_stream(loader.sampler)
        with stop_scope(flag), device, stream as current:  # every launch and CuPy call: one stream
            for index in range(first, len(slices), step):
                if stop.is_set():
                    return
                batch = loader._make_batch(epoch, index, slices[index])
                if current is not None:
                    synchronize(current)  # sync: the batch is complete before the caller sees it
                if not _put(items, stop, ("batch", batch)):
                    return
        _put(items, stop, ("done", None))
    except BaseException as error:  # every error, KeyboardInterrupt included, is re-raised in the caller
        _put(items, stop, ("error", error))


class PrefetchIterator:
    """One epoch: daemon producer threads fill bounded queues; ``__next__`` drains them in order.

    ``loader`` is a loader of this package: ``loader._make_batch(epoch, index, seeds)`` prepares a
    batch (from several threads at once when there are several workers), ``loader.prefetch``
    bounds the queues (``ceil(prefetch / workers)`` batches each), an optional ``loader.workers``
    (default 1) is the number of producer threads, ``loader.sampler.device`` picks the CUDA stream
    (one per producer),
    ``loader._count(wait_s=...)`` records the caller's waits, and an optional
    ``loader.producer_threads`` caps the Numba threads of each producer thread (the trainer's own
    threads are left alone), and an optional ``loader.producer_nice`` (``> 0``) lowers each
    producer thread's scheduling priority by as much (on Linux, where a thread has a nice value of its
    own), so that it runs on the cycles the trainer leaves idle. ``slices`` are the epoch's seed
    batches.
    """

    def __init__(self, loader, epoch: int, slices: list):
        self._loader, self._num_batches = loader, len(slices)
        workers = getattr(loader, "workers", 1)
        depth = -(-loader.prefetch // workers)  # ceil: workers = 1 keeps prefetch's bound exactly
        self._queues: list = [queue.Queue(maxsize=depth) for _ in range(workers)]
        self._stop = threading.Event()
        self._flag = StopFlag()  # set with _stop: stops the producers' kernel calls mid-batch
        self._finished = False
        self._next = 0  # the index of the next batch: it comes from queue _next % workers
        name = f"gglspeedup-{type(loader).__name__}-epoch{epoch}"
        # Started by the first __next__, so an iterator created and never used costs nothing.
        self._threads = [
            threading.Thread(
                target=_produce,
                args=(loader, epoch, slices, worker, workers, self._queues[worker], self._stop, self._flag),
                name=name if workers == 1 else f"{name}-worker{worker}",
                daemon=True,
            )
            for worker in range(workers)
        ]

    def __len__(self) -> int:
        return self._num_batches

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        if self._threads[0].ident is None:
            for thread in self._threads:
                thread.start()
        start = time.perf_counter()
        try:
            kind, value = self._wait(self._next % len(self._threads))
        except BaseException:  # Ctrl-C while waiting (or any error): the producer ends with the loop
            self.close()
            raise
        self._loader._count(wait_s=time.perf_counter() - start)
        if kind == "batch":
            self._next += 1
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def _wait(self, worker: int):
        """The next ``(kind, value)`` producer ``worker`` queued."""
        items, thread = self._queues[worker], self._threads[worker]
        while True:
            try:
                return items.get(timeout=_POLL_S)
            except queue.Empty:
                if thread.is_alive():
                    continue
                try:  # the producer may have queued its last item just before exiting
                    return items.get_nowait()
                except queue.Empty:
                    raise RuntimeError(
                        f"the {type(self._loader).__name__} producer thread stopped without a result"
                    ) from None

    def close(self) -> None:
        """Stop the producers (used when the caller leaves the loop early, or is interrupted):
        their batches in progress end within a block of kernel work, and the threads are joined."""
        self._finished = True
        self._stop.set()
        self._flag.set()
        for items in self._queues:
            with contextlib.suppress(queue.Empty):
                while True:
                    items.get_nowait()
        for thread in self._threads:
            if thread.ident is not None and thread is not threading.current_thread():
                thread.join(timeout=1.0)

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()
