"""``python -m gglspeedup.service serve PATH``: serve a partitioned folder until interrupted.

Starts the servers (Ray actors) on the Ray cluster at ``--address`` (``auto``: the one this
machine belongs to; none: a new local instance), under names, prints one line per server (index,
partitions, node, pid) and ``ready``, and keeps them up until SIGINT or SIGTERM, when it stops
them. A trainer on the same cluster then calls ``gglspeedup.service.serve(PATH, address="auto")``
and uses these servers instead of starting its own::

    python -m gglspeedup.service serve /data/papers-4parts --address auto --replicas 2
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .._argtypes import address_text
from ..validation import check_seconds

__all__ = ["main"]


def _checked(check, what):
    """An ``argparse`` type: ``check(what, text)``'s value, or a usage error naming the flag
    (``argument --deadline: the deadline must be ...``) instead of the library's message naming
    its parameter out of :func:`~gglspeedup.service.serve`."""

    def parse(text):
        try:
            return check(what, text)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command's parser and its ``serve`` subparser (whose ``error`` names the subcommand)."""
    parser = argparse.ArgumentParser(prog="python -m gglspeedup.service", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    command = sub.add_parser("serve", help="serve a partitioned folder until interrupted")
    command.add_argument("path", help="a folder written by gglspeedup.service.partition")
    command.add_argument(
        "--servers", "--num-servers", type=int, default=None, help="servers (groups of partitions); default: one a part"
    )
    command.add_argument(
        "--address",
        default=None,
        type=address_text,
        help="Ray cluster to join: auto, host:port or ray://host:port",
    )
    command.add_argument("--replicas", type=int, default=1, help="processes per server (default 1)")
    command.add_argument("--max-restarts", type=int, default=1, help="restarts per process, -1: always (default 1)")
    command.add_argument(
        "--deadline",
        default="5s",
        type=_checked(check_seconds, "the deadline"),
        help="time a request may take: seconds, or 500ms, 5s, 2m (default 5s)",
    )
    command.add_argument("--no-verify", action="store_true", help="map the parts without checking their checksums")
    return parser, command


def main(argv=None) -> int:
    parser, command = _parser()
    args = parser.parse_args(argv)
    for flag, value, minimum in (("--servers", args.servers, 1), ("--replicas", args.replicas, 1)):
        if value is not None and value < minimum:
            command.error(f"{flag} must be >= {minimum}, got {value}")
    if args.max_restarts < -1:
        command.error(f"--max-restarts must be >= -1 (-1: always), got {args.max_restarts}")
    from .book import PartitionBook
    from .cluster import serve

    try:
        num_parts = PartitionBook.load(args.path).num_parts
        if args.servers is not None and args.servers > num_parts:
            command.error(f"--servers must be at most the number of partitions ({num_parts}), got {args.servers}")
        cluster = serve(
            args.path,
            args.servers,
            address=args.address,
            replicas=args.replicas,
            max_restarts=args.max_restarts,
            deadline=args.deadline,
            verify=not args.no_verify,
            named=True,
        )
    except (TypeError, ValueError, FileNotFoundError, ConnectionError) as error:  # serve refused its arguments
        command.error(str(error))  # a usage error (exit status 2), not a traceback
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # after Ray's start, which sets handlers of its own
        signal.signal(signum, lambda *_: stop.set())
    try:
        for server in cluster.servers:
            pids = " ".join(str(pid) for _, pid in server.replicas)
            print(f"server {server.index} parts {list(server.parts)} node {server.node} pids {pids}", flush=True)
        print(f"ready: {cluster.num_servers} servers for {cluster.book.path}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        cluster.close()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
