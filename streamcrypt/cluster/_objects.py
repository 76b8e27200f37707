"""Many objects on a cluster: one task per object, streamed through the engine.

Each task opens its source with fsspec, resolves its key provider on the worker, and runs
the object through :func:`streamcrypt.pipeline` (the native container; rotation is the
decryptor under the old key piped into the encryptor under the new one), reading
``chunk_size`` bytes at a time, so a worker holds a few chunks and segments of an object,
never the whole of it. Outputs go to a temporary beside the destination and are moved
over it once complete (:mod:`._storage`; on a local disk through
:func:`streamcrypt.paths.create_beneath`, which follows no symbolic link below the
destination prefix); verify writes nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from distributed import Client

from ..abc import Transform, as_bytes
from ..codecs.container import DEFAULT_SEGMENT_SIZE, StreamDecryptor, StreamEncryptor
from ..engine import DEFAULT_POLICY, pipeline, run_io
from ..errors import InvalidParameterError, StreamCryptError
from ..paths import create_beneath, object_key
from ._jobs import ObjectResult, Progress, Summary, run_tasks, summarize
from ._keys import KeyProvider, as_provider
from ._storage import (
    ObjectPair,
    commit,
    destination,
    discard,
    expand,
    is_local,
    new_run_id,
    open_fs,
    remove_run_temporaries,
    temporary_path,
)

#: Bytes a task reads from its source per call: a few of these are in memory per task.
DEFAULT_CHUNK_SIZE = 4 << 20
#: Times Dask runs a task again after an error that is not a data failure (I/O).
DEFAULT_RETRIES = 2
_OPERATIONS = ("encrypt", "decrypt", "rekey", "verify")


@dataclass(frozen=True, slots=True)
class CryptOptions:
    """Format parameters of the native container and how a task streams (all public)."""

    suite: str = "aes-256-gcm"
    segment_size: int = DEFAULT_SEGMENT_SIZE
    aad: bytes = b""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    offload: bool = True  # let the engine use the worker machine's other cores

    def __repr__(self) -> str:
        return f"CryptOptions(suite={self.suite!r}, segment_size={self.segment_size})"


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """Everything a task needs besides its object; pickled to the workers (no secrets)."""

    operation: str
    key: KeyProvider
    new_key: KeyProvider | None
    options: CryptOptions
    run_id: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    destination: str | None = None  # the destination prefix URL (None: verify)

    def stages(self) -> list[Transform]:
        """The transforms of this operation, keys resolved here (on the worker)."""
        opts = self.options
        if self.operation in ("decrypt", "verify", "rekey"):
            stages: list[Transform] = [StreamDecryptor(self.key.resolve(), aad=opts.aad)]
        else:
            stages = []
        if self.operation in ("encrypt", "rekey"):
            provider = self.new_key if self.operation == "rekey" else self.key
            assert provider is not None
            stages.append(
                StreamEncryptor(
                    provider.resolve(),
                    suite=opts.suite,
                    segment_size=opts.segment_size,
                    aad=opts.aad,
                )
            )
        return stages


async def _pump(stages: list[Transform], reader: Any, writer: Any, opts: CryptOptions) -> list[int]:
    counts = [0, 0]

    async def source() -> AsyncIterator[bytes]:
        while True:
            data = await run_io(reader.read, opts.chunk_size)
            if not data:
                return
            counts[0] += len(data)
            yield data

    async def sink(view: memoryview) -> None:
        counts[1] += len(view)
        if writer is not None:
            await run_io(writer.write, view)

    policy = DEFAULT_POLICY if opts.offload else None
    await pipeline(*stages, policy=policy).run(source(), sink)
    return counts


def _write(spec: ObjectSpec, stages: list[Transform], reader: Any, name: str) -> list[int]:
    """Stream into the object ``name`` under the destination prefix: on a local disk
    through :func:`streamcrypt.paths.create_beneath` (no symbolic link followed, whenever
    it was planted), elsewhere to a temporary key moved over the destination."""
    assert spec.destination is not None
    fs, path = destination(spec.destination, name, spec.storage_options)  # checked again here
    if is_local(fs):
        _, root = open_fs(spec.destination, spec.storage_options)
        tag = spec.run_id + secrets.token_hex(4)
        with (
            create_beneath(root, name, what="the object name", tag=tag) as fd,
            open(fd, "wb", closefd=False) as writer,
        ):
            return anyio.run(_pump, stages, reader, writer, spec.options)
    tmp = temporary_path(fs, path, spec.run_id)
    try:
        with fs.open(tmp, "wb") as writer:
            counts = anyio.run(_pump, stages, reader, writer, spec.options)
        commit(fs, tmp, path)
    except BaseException:
        discard(fs, tmp)
        raise
    return counts


def process_object(pair: ObjectPair, spec: ObjectSpec) -> ObjectResult:
    """The task: one object, start to finish (runs on a worker).

    A :class:`StreamCryptError` is returned as a failed result (the data is bad, a retry
    would fail again); anything else is raised for Dask to retry.
    """
    src, name, _ = pair
    prefix = spec.destination
    dst = None
    try:
        stages = spec.stages()
        fs, path = open_fs(src, spec.storage_options)
        if name is None or prefix is None:
            with fs.open(path, "rb") as reader:
                counts = anyio.run(_pump, stages, reader, None, spec.options)
            return ObjectResult(src, None, counts[0], 0)
        dst = object_key(prefix, name)
        with fs.open(path, "rb") as reader:
            counts = _write(spec, stages, reader, name)
        return ObjectResult(src, dst, counts[0], counts[1])
    except StreamCryptError as exc:
        return ObjectResult(src, dst, error=type(exc).__name__, message=str(exc))


def _run(
    client: Client,
    spec: ObjectSpec,
    pairs: list[ObjectPair],
    *,
    retries: int,
    progress: Progress | None,
    started: float,
) -> Summary:
    """Run ``spec`` over ``pairs``; then, however the run ends (a progress callback that
    raised, a cancellation), remove this run's temporaries that remain."""
    urls = [
        object_key(spec.destination, name)  # checked by expand; where the temporaries are
        for _, name, _ in pairs
        if spec.destination is not None and name is not None
    ]
    try:
        results = run_tasks(
            client, process_object, pairs, spec, f"streamcrypt-{spec.operation}-{spec.run_id}",
            [src for src, _, _ in pairs], retries=retries, progress=progress,
        )  # fmt: skip
    finally:
        removed = remove_run_temporaries(urls, spec.run_id, spec.storage_options) if urls else 0
    return summarize(spec.operation, results, started, removed=removed)


def check_options(
    chunk_size: int, suite: str | None = None, segment_size: int = DEFAULT_SEGMENT_SIZE
) -> None:
    """Refuse here, before any task runs, what every task would refuse: a chunk size
    under 1 (:class:`InvalidParameterError`) and, given a ``suite`` to write, a suite or
    segment size the container does not take (what :class:`StreamEncryptor` raises)."""
    if chunk_size < 1:
        raise InvalidParameterError("chunk_size must be positive")
    if suite is not None:
        StreamEncryptor(bytes(32), suite=suite, segment_size=segment_size)


def _submit(
    client: Client,
    operation: str,
    src: str | Sequence[str],
    dst: str | None,
    key: object,
    new_key: object | None,
    options: CryptOptions,
    *,
    suffix: str = "",
    strip_suffix: str = "",
    retries: int,
    progress: Progress | None,
    storage_options: Mapping[str, Any] | None,
) -> Summary:
    assert operation in _OPERATIONS
    started = time.perf_counter()
    writes = operation in ("encrypt", "rekey")
    check_options(options.chunk_size, options.suite if writes else None, options.segment_size)
    so = dict(storage_options or {})
    spec = ObjectSpec(
        operation,
        as_provider(key, "key" if operation != "rekey" else "old_key"),
        None if new_key is None else as_provider(new_key, "new_key"),
        options,
        new_run_id(),
        so,
        dst,
    )
    pairs = expand(src, dst, so, suffix=suffix, strip_suffix=strip_suffix)
    return _run(client, spec, pairs, retries=retries, progress=progress, started=started)


def encrypt_objects(
    client: Client,
    src: str | Sequence[str],
    dst: str,
    key: KeyProvider,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: bytes = b"",
    suffix: str = "",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    offload: bool = True,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Encrypt every object under prefix (or in list) ``src`` into prefix ``dst`` (native
    container, names kept, ``suffix`` appended), one task per object on ``client``.

    Raises :class:`InvalidParameterError` for a key that is not a provider or an empty
    source; per-object failures are in the returned :class:`Summary`.
    """
    opts = CryptOptions(suite, segment_size, as_bytes(aad, "aad"), chunk_size, offload)
    return _submit(
        client, "encrypt", src, dst, key, None, opts, suffix=suffix,
        retries=retries, progress=progress, storage_options=storage_options,
    )  # fmt: skip


def decrypt_objects(
    client: Client,
    src: str | Sequence[str],
    dst: str,
    key: KeyProvider,
    *,
    aad: bytes = b"",
    strip_suffix: str = "",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    offload: bool = True,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Decrypt every object under ``src`` into ``dst`` (``strip_suffix`` removed from
    names). An object that fails (``AuthenticationError``, ``TruncatedStreamError``,
    ``FormatError``, ``UnknownKeyError``) leaves its destination untouched."""
    opts = CryptOptions(aad=as_bytes(aad, "aad"), chunk_size=chunk_size, offload=offload)
    return _submit(
        client, "decrypt", src, dst, key, None, opts, strip_suffix=strip_suffix,
        retries=retries, progress=progress, storage_options=storage_options,
    )  # fmt: skip


def rekey_objects(
    client: Client,
    src: str | Sequence[str],
    dst: str,
    old_key: KeyProvider,
    new_key: KeyProvider,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: bytes = b"",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    offload: bool = True,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Re-encrypt (key rotation): decrypt each object under ``old_key`` and encrypt it
    under ``new_key`` in one stream, plaintext never written. ``dst`` may equal ``src``
    (in place: each object is replaced only once its new form is complete)."""
    opts = CryptOptions(suite, segment_size, as_bytes(aad, "aad"), chunk_size, offload)
    return _submit(
        client, "rekey", src, dst, old_key, new_key, opts,
        retries=retries, progress=progress, storage_options=storage_options,
    )  # fmt: skip


def verify_objects(
    client: Client,
    src: str | Sequence[str],
    key: KeyProvider,
    *,
    aad: bytes = b"",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    offload: bool = True,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Authenticate every object under ``src`` end to end; nothing is written."""
    opts = CryptOptions(aad=as_bytes(aad, "aad"), chunk_size=chunk_size, offload=offload)
    return _submit(
        client, "verify", src, None, key, None, opts,
        retries=retries, progress=progress, storage_options=storage_options,
    )  # fmt: skip
