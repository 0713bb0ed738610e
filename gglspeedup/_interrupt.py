"""Ctrl-C during long kernel calls: ``KeyboardInterrupt`` reaches the caller as itself, promptly,
and nothing the aborted call allocated stays alive.

Why this is needed. The CPU kernels are ``@njit(nogil=True)`` calls; Python runs a signal's
handler only when the main thread executes bytecode again. Two things went wrong with that:

- A kernel that returns new arrays has them boxed by Numba, which calls a Python function
  (``numba.core.serialize._numba_unpickle``, for each dtype) on the way out. A pending SIGINT ran
  its handler *there*: the ``KeyboardInterrupt`` was raised inside Numba's boxing, which then
  failed half-way (``SystemError: ... returned a result with an exception set``, the interrupt
  buried in its context) and leaked the arrays it had not boxed yet (the issue's 0.7 GiB per
  interrupted call).
- One kernel call can run for seconds (a hop of a large batch), and the signal waited for it.

What this module does:

- :class:`interruptible` (a context manager, in the main thread) swaps Python's default SIGINT
  handler for one that only *records* the signal, so no handler runs inside Numba's boxing (a
  handler of the user's own is left in place: it decides what Ctrl-C does). Code inside checks
  :meth:`interruptible.stopping` at its safe points (between hops, chunks, passes), drops its
  buffers and returns; on leaving the block the original handler is restored and called (the
  default one raises ``KeyboardInterrupt``), in a frame that no longer holds those buffers.
- :meth:`interruptible.run` runs one long kernel call that polls a stop flag
  (``stop[0] != 0``) between blocks of its work: from the main thread on a helper thread while the
  main thread waits (so the handler can run), setting the flag when a SIGINT is recorded; from any
  other thread inline, with that thread's flag (:func:`stop_scope`).
- :func:`stop_scope` gives a thread (a loader's producer) a :class:`StopFlag`: the kernels it
  calls through :meth:`interruptible.run` poll it, and :meth:`interruptible.stopping` reads it, so
  setting the flag from another thread ends the producer's current call within a block of work
  (the call raises :class:`StopRequested`).

Threads other than the main thread never run signal handlers, so only the main thread defers.
Short calls are not moved to another thread (a thread hand-off costs tens of microseconds, more
on a busy machine): they end within the hop, chunk or pass, which is the bound on the latency.
"""

from __future__ import annotations

import signal
import threading

import numpy as np

try:  # the C functions under signal.getsignal / signal.signal, without their enum wrapping (3x faster)
    from _signal import getsignal as _getsignal
    from _signal import signal as _setsignal
except ImportError:  # pragma: no cover - not CPython
    _getsignal, _setsignal = signal.getsignal, signal.signal

__all__ = ["interruptible", "StopFlag", "StopRequested", "stop_scope", "current_flag"]

_POLL_S = 0.02  # how often the main thread, waiting for a long kernel, looks at the recorded signal


class StopRequested(BaseException):
    """Raised in a thread whose :class:`StopFlag` was set while it ran an interruptible call (a
    loader's producer being closed). A ``BaseException``, like ``KeyboardInterrupt``, so a broad
    ``except Exception`` does not swallow it."""


class StopFlag:
    """One byte a kernel polls (``array[0] != 0``) and another thread sets."""

    __slots__ = ("array",)

    def __init__(self):
        self.array = np.zeros(1, np.uint8)

    def set(self) -> None:
        self.array[0] = 1

    def is_set(self) -> bool:
        return bool(self.array[0])


_NEVER = StopFlag()  # the flag of threads without a scope: never set
_local = threading.local()


class stop_scope:
    """``with stop_scope(flag):`` the interruptible calls of this thread poll ``flag``."""

    def __init__(self, flag: StopFlag):
        self.flag = flag

    def __enter__(self):
        self._previous = getattr(_local, "flag", None)
        _local.flag = self.flag
        return self.flag

    def __exit__(self, *exc):
        _local.flag = self._previous
        return False


def current_flag() -> StopFlag | None:
    """The flag of this thread's :class:`stop_scope`, or ``None``."""
    return getattr(_local, "flag", None)


class _MainThread:
    """The main thread's deferral: nesting depth, the recorded signal, the replaced handler."""

    depth = 0
    fired = False
    previous = None  # the handler replaced by _record (None: not deferring)


_main = _MainThread()


def _record(signum, frame) -> None:
    _main.fired = True


def _is_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class interruptible:
    """A block whose SIGINT (main thread) or stop flag (other threads) is handled at safe points.

    Examples
    --------
    >>> from gglspeedup._interrupt import interruptible
    >>> with interruptible() as guard:
    ...     for part in range(3):
    ...         if guard.stopping():
    ...             break  # drop this block's buffers here; leaving the block raises
    """

    __slots__ = ("flag", "main")

    def __enter__(self):
        self.main = _is_main_thread()
        if not self.main:
            self.flag = current_flag() or _NEVER
            return self
        self.flag = _NEVER
        if _main.depth == 0 and _getsignal(signal.SIGINT) is signal.default_int_handler:
            try:
                _setsignal(signal.SIGINT, _record)
                _main.previous, _main.fired = signal.default_int_handler, False
            except ValueError:  # not the main interpreter: handlers cannot be set here
                pass
        _main.depth += 1
        return self

    def stopping(self) -> bool:
        """True once a SIGINT was recorded (main thread) or this thread's flag was set."""
        return _main.fired if self.main else self.flag.is_set()

    def __exit__(self, exc_type, exc, tb):
        if not self.main:
            if exc_type is None and self.flag.is_set():
                raise StopRequested("the call was stopped (its thread's stop flag was set)")
            return False
        _main.depth -= 1
        previous = _main.previous
        if previous is not None and (_main.fired or _main.depth == 0):
            _main.previous = None
            _setsignal(signal.SIGINT, previous)
            if _main.fired:
                _main.fired = False
                previous(signal.SIGINT, None)  # Python's default handler: raises KeyboardInterrupt
        return False

    def run(self, kernel, *args):
        """``kernel(*args, stop)``, where ``stop`` is a one-byte array the kernel polls between
        blocks of its work and gives up when non-zero. Returns the kernel's result, or ``None``
        when it was stopped (:meth:`stopping` is then true and the result is discarded).

        In the main thread, while deferring SIGINT, the kernel runs on a helper thread (with the
        caller's Numba thread count) and the main thread waits, so the handler runs: a recorded
        signal sets the flag and the kernel stops at its next check. Elsewhere it runs inline
        with this thread's flag.
        """
        if not self.main or _main.previous is None:
            return kernel(*args, self.flag.array)
        import numba

        flag = StopFlag()
        threads = numba.get_num_threads()
        outcome = []

        def body():
            try:
                numba.set_num_threads(threads)
                outcome.append((True, kernel(*args, flag.array)))
            except BaseException as error:  # handed to the caller below
                outcome.append((False, error))

        worker = threading.Thread(target=body, name="gglspeedup-kernel", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(_POLL_S)
            if _main.fired:
                flag.set()  # the kernel returns at its next check
        ok, value = outcome.pop()
        if not ok:
            raise value
        return None if _main.fired else value
