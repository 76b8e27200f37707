"""The cluster commands: ``encrypt``/``decrypt --scheduler ADDRESS SRC_URL DST_URL``,
``rekey-objects --scheduler ADDRESS SRC_URL DST_URL`` and ``verify-objects --scheduler ADDRESS
SRC_URL``, each the matching many-objects job of :mod:`streamcrypt.cluster` on a Dask
cluster (the ``streamcrypt[dask]`` extra; docs/CLUSTER.md).

Every key comes from a key file (a ``streamcrypt keygen`` symmetric key file) read on each
worker, so its path must exist there, or from the workers' environment variable; no key
crosses the wire. One function, :func:`run_cluster`, runs all four: it checks the command
line, builds the key providers and the job's options, shows a rich progress bar counting
objects (unless ``-q``), and reports the summary on stderr.

The cluster form of ``verify`` is its own command, ``verify-objects``: ``verify`` checks
Ed25519ph signatures with a public key and a signature file, and shares no option with
authenticating containers under a symmetric key (docs/CLI.md).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from ._errors import EXIT_DATA, EXIT_USAGE, CliError

# ``typing.TYPE_CHECKING`` without importing typing: the parser imports this module on
# every run, so it imports neither typing nor dataclasses (~15 ms of start-up together).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import cluster
    from ..keys import SecretKey


class _KeySource:
    """One key of a job: the options naming a key file and a worker environment variable."""

    __slots__ = ("env_flag", "file_dest", "file_flags", "role")

    def __init__(
        self, file_dest: str, file_flags: tuple[str, ...], env_flag: str, role: str
    ) -> None:
        self.file_dest = file_dest  # the argparse dest of the key file option (``key``, ...)
        self.file_flags = file_flags
        self.env_flag = env_flag
        self.role = role  # in help and messages: "the key", "the old key", ...

    @property
    def env_dest(self) -> str:
        return self.env_flag.lstrip("-").replace("-", "_")


_KEY = _KeySource("key", ("-k", "--key"), "--key-env", "the key")
_OLD_KEY = _KeySource("old_key", ("--old-key",), "--old-key-env", "the old key")
_NEW_KEY = _KeySource("new_key", ("--new-key",), "--new-key-env", "the new key")


class _Job:
    """What a command runs: the cluster function's name, its keys, what it writes."""

    __slots__ = ("command", "destination", "encrypts", "function", "keys")

    def __init__(
        self,
        command: str,
        function: str,
        keys: tuple[_KeySource, ...],
        *,
        destination: bool,
        encrypts: bool,
    ) -> None:
        self.command = command  # as typed, and in the progress bar and summary line
        self.function = function
        self.keys = keys
        self.destination = destination  # writes objects under DST_URL (verify writes nothing)
        self.encrypts = encrypts  # takes --suite and --segment-size


#: The cluster command of each operation.
_JOBS = {
    "encrypt": _Job("encrypt", "encrypt_objects", (_KEY,), destination=True, encrypts=True),
    "decrypt": _Job("decrypt", "decrypt_objects", (_KEY,), destination=True, encrypts=False),
    "rekey": _Job(
        "rekey-objects", "rekey_objects", (_OLD_KEY, _NEW_KEY), destination=True, encrypts=True
    ),
    "verify": _Job("verify-objects", "verify_objects", (_KEY,), destination=False, encrypts=False),
}
OPERATIONS = tuple(_JOBS)

_SCHEDULER_HELP = "the Dask scheduler to run on (tcp:// or tls://)"


def _add_key_options(p: argparse.ArgumentParser, source: _KeySource, *, file: bool) -> None:
    if file:
        p.add_argument(
            *source.file_flags,
            dest=source.file_dest,
            metavar="KEYFILE",
            help=f"{source.role}: a symmetric key file, read on each worker",
        )
    p.add_argument(
        source.env_flag,
        metavar="VAR",
        help=("" if file else "with --scheduler: ")
        + f"{source.role} in the workers' environment variable VAR (hex or base64)",
    )


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """``DST_URL``, ``--scheduler`` and ``--key-env`` on the local ``encrypt``/``decrypt``
    parsers (which have ``-k`` already)."""
    p.add_argument(
        "destination",
        nargs="?",
        metavar="DST_URL",
        help="with --scheduler: the destination prefix (fsspec URL)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=_SCHEDULER_HELP + "; IN is then a source URL or prefix",
    )
    _add_key_options(p, _KEY, file=False)


def add_cluster_command(p: argparse.ArgumentParser, operation: str) -> None:
    """The whole command line of a cluster-only command (``rekey-objects``, ``verify-objects``),
    apart from the native format options (``--suite``, ``--segment-size``) a caller adds
    for a job that encrypts."""
    job = _JOBS[operation]
    p.add_argument("input", metavar="SRC_URL", help="the source prefix or object (fsspec URL)")
    if job.destination:
        p.add_argument(
            "destination",
            metavar="DST_URL",
            help="the destination prefix (fsspec URL); may equal SRC_URL (in place)",
        )
    p.add_argument("--scheduler", metavar="ADDRESS", required=True, help=_SCHEDULER_HELP)
    for source in job.keys:
        _add_key_options(p, source, file=True)
    p.add_argument(
        "--aad", metavar="TEXT", help="associated data the objects are sealed with, UTF-8"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def load_symmetric_key(path: str) -> SecretKey:
    """On a worker: the symmetric key in the CLI key file ``path``."""
    from ._keyfiles import load_key_file

    keyfile = load_key_file(path)
    keyfile.require("symmetric", purpose="a cluster job needs a symmetric key file")
    assert keyfile.symmetric is not None
    return keyfile.symmetric


def _provider(args: argparse.Namespace, job: _Job, source: _KeySource) -> cluster.KeyProvider:
    from .. import cluster

    path = getattr(args, source.file_dest, None)
    variable = getattr(args, source.env_dest, None)
    if (path is None) == (variable is None):
        raise CliError(
            f"{job.command} --scheduler takes {source.role} from one of "
            f"{source.file_flags[0]} KEYFILE or {source.env_flag} VAR",
            EXIT_USAGE,
        )
    if variable is not None:
        return cluster.EnvKey(str(variable))
    return cluster.CallableKey(functools.partial(load_symmetric_key, str(path)))


def run_cluster(args: argparse.Namespace, operation: str) -> int:
    """Run ``operation`` (one of :data:`OPERATIONS`) on ``args.scheduler``; 0 when every
    object succeeded, 1 when any failed (each listed on stderr with its typed error)."""
    job = _JOBS[operation]
    try:
        from distributed import Client

        from .. import cluster
    except ImportError:
        raise CliError(
            "--scheduler needs the dask extra: pip install 'streamcrypt[dask]'", EXIT_USAGE
        ) from None
    if job.destination and (not args.input or not args.destination):
        raise CliError("--scheduler takes a source URL and a destination URL", EXIT_USAGE)
    if not args.input:
        raise CliError("--scheduler takes a source URL", EXIT_USAGE)
    keys = [_provider(args, job, source) for source in job.keys]
    kwargs: dict[str, Any] = {"aad": (args.aad or "").encode()}
    if job.encrypts:
        if args.suite:
            kwargs["suite"] = args.suite
        if args.segment_size:
            kwargs["segment_size"] = args.segment_size
    where = [args.input, args.destination] if job.destination else [args.input]
    run: Callable[..., cluster.Summary] = getattr(cluster, job.function)
    with Client(args.scheduler) as client:  # type: ignore[no-untyped-call]
        bar = _bar(args.quiet)
        with bar:
            task = bar.add_task(job.command, total=None)
            kwargs["progress"] = lambda result: bar.advance(task)
            summary = run(client, *where, *keys, **kwargs)
    for failure in summary.failures:
        sys.stderr.write(f"streamcrypt: {failure.url}: {failure.error}: {failure.message}\n")
    sys.stderr.write(
        f"streamcrypt: {job.command}: {summary.succeeded}/{summary.objects} objects, "
        f"{summary.bytes_in} bytes in, {summary.bytes_out} out, {summary.seconds:.2f} s\n"
    )
    if not summary.ok:
        raise CliError(
            f"{summary.objects - summary.succeeded} of {summary.objects} objects failed "
            "(listed above)",
            EXIT_DATA,
        )
    return 0


def _bar(quiet: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), disable=quiet
    )
