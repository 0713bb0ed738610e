"""The loaders' background producer: a thread prepares batches into a bounded queue.

The thread holds no reference to the iterator, so an iterator the caller abandons is
garbage-collected and its ``__del__`` stops the thread; an exception raised while preparing a
batch is handed to the caller's loop and re-raised there.
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


def _produce(loader, epoch: int, slices: list, items: queue.Queue, stop: threading.Event, flag: StopFlag) -> None:
    """The producer thread's body. It holds no reference to the iterator, so an iterator the
    caller abandons is garbage-collected, and its ``__del__`` stops this thread. ``flag`` is set
    with ``stop``: the long kernel calls of a batch in progress poll it (gglspeedup._interrupt),
    so closing the iterator ends the batch within a block of work, not at its end."""
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
            for index, batch_seeds in enumerate(slices):
                if stop.is_set():
                    return
                batch = loader._make_batch(epoch, index, batch_seeds)
                if current is not None:
                    synchronize(current)  # sync: the batch is complete before the caller sees it
                if not _put(items, stop, ("batch", batch)):
                    return
        _put(items, stop, ("done", None))
    except BaseException as error:  # every error, KeyboardInterrupt included, is re-raised in the caller
        _put(items, stop, ("error", error))


class PrefetchIterator:
    """One epoch: a daemon producer thread fills a bounded queue; ``__next__`` drains it.

    ``loader`` is a loader of this package: ``loader._make_batch(epoch, index, seeds)`` prepares a
    batch, ``loader.prefetch`` bounds the queue, ``loader.sampler.device`` picks the CUDA stream,
    ``loader._count(wait_s=...)`` records the caller's waits, and an optional
    ``loader.producer_threads`` caps the Numba threads of the producer thread (the trainer's own
    threads are left alone), and an optional ``loader.producer_nice`` (``> 0``) lowers that
    thread's scheduling priority by as much (on Linux, where a thread has a nice value of its
    own), so that it runs on the cycles the trainer leaves idle. ``slices`` are the epoch's seed
    batches.
    """

    def __init__(self, loader, epoch: int, slices: list):
        self._loader, self._num_batches = loader, len(slices)
        self._queue: queue.Queue = queue.Queue(maxsize=loader.prefetch)
        self._stop = threading.Event()
        self._flag = StopFlag()  # set with _stop: stops the producer's kernel calls mid-batch
        self._finished = False
        # Started by the first __next__, so an iterator created and never used costs nothing.
        self._thread = threading.Thread(
            target=_produce,
            args=(loader, epoch, slices, self._queue, self._stop, self._flag),
            name=f"gglspeedup-{type(loader).__name__}-epoch{epoch}",
            daemon=True,
        )

    def __len__(self) -> int:
        return self._num_batches

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        if self._thread.ident is None:
            self._thread.start()
        start = time.perf_counter()
        try:
            kind, value = self._wait()
        except BaseException:  # Ctrl-C while waiting (or any error): the producer ends with the loop
            self.close()
            raise
        self._loader._count(wait_s=time.perf_counter() - start)
        if kind == "batch":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def _wait(self):
        """The next ``(kind, value)`` the producer queued."""
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if self._thread.is_alive():
                    continue
                try:  # the producer may have queued its last item just before exiting
                    return self._queue.get_nowait()
                except queue.Empty:
                    raise RuntimeError(
                        f"the {type(self._loader).__name__} producer thread stopped without a result"
                    ) from None

    def close(self) -> None:
        """Stop the producer (used when the caller leaves the loop early, or is interrupted): its
        batch in progress ends within a block of kernel work, and the thread is joined."""
        self._finished = True
        self._stop.set()
        self._flag.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()
