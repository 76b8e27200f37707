"""``streamcrypt encrypt|decrypt --scheduler ADDRESS SRC_URL DST_URL``: the same job on a
Dask cluster (the ``streamcrypt[dask]`` extra; docs/CLUSTER.md).

The key file named by ``-k`` is read on each worker (the path must exist there), or the
key comes from the workers' environment variable named by ``--key-env``; no key crosses
the wire. A rich progress bar counts objects as they complete unless ``-q``.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from ..keys import SecretKey
from ._errors import EXIT_USAGE, CliError
from ._keyfiles import load_key_file

__all__ = ["add_cluster_arguments", "load_symmetric_key", "run_cluster"]


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "destination",
        nargs="?",
        metavar="DST_URL",
        help="with --scheduler: the destination prefix (fsspec URL)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on this Dask scheduler (tcp:// or tls://); IN is then a source URL or prefix",
    )
    p.add_argument(
        "--key-env",
        metavar="VAR",
        help="with --scheduler: the workers' environment variable holding the key (hex/base64)",
    )


def load_symmetric_key(path: str) -> SecretKey:
    """On a worker: the symmetric key in the CLI key file ``path``."""
    keyfile = load_key_file(path)
    keyfile.require("symmetric", purpose="a cluster job needs a symmetric key file")
    assert keyfile.symmetric is not None
    return keyfile.symmetric


def run_cluster(args: argparse.Namespace, operation: str) -> int:
    try:
        from distributed import Client

        from .. import cluster
    except ImportError:
        raise CliError(
            "--scheduler needs the dask extra: pip install 'streamcrypt[dask]'", EXIT_USAGE
        ) from None
    if not args.input or not args.destination:
        raise CliError("--scheduler takes a source URL and a destination URL", EXIT_USAGE)
    if (args.key is None) == (args.key_env is None):
        raise CliError("--scheduler takes one of -k KEYFILE or --key-env VAR", EXIT_USAGE)
    provider: cluster.KeyProvider = (
        cluster.EnvKey(args.key_env)
        if args.key_env is not None
        else cluster.CallableKey(functools.partial(load_symmetric_key, args.key))
    )
    aad = (args.aad or "").encode()
    kwargs: dict[str, Any] = {"aad": aad}
    if operation == "encrypt":
        if args.suite:
            kwargs["suite"] = args.suite
        if args.segment_size:
            kwargs["segment_size"] = args.segment_size
    with Client(args.scheduler) as client:  # type: ignore[no-untyped-call]
        bar = _bar(args.quiet)
        with bar:
            task = bar.add_task(operation, total=None)
            kwargs["progress"] = lambda result: bar.advance(task)
            run = cluster.encrypt_objects if operation == "encrypt" else cluster.decrypt_objects
            summary = run(client, args.input, args.destination, provider, **kwargs)
    for failure in summary.failures:
        sys.stderr.write(f"streamcrypt: {failure.url}: {failure.error}: {failure.message}\n")
    sys.stderr.write(
        f"streamcrypt: {operation}: {summary.succeeded}/{summary.objects} objects, "
        f"{summary.bytes_in} bytes in, {summary.bytes_out} out, {summary.seconds:.2f} s\n"
    )
    return 0 if summary.ok else 1


def _bar(quiet: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), disable=quiet
    )
