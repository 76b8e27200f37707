"""One huge object on many workers, by ranges of whole segments.

Segment *i* of a native container is sealed with nonce ``prefix || i || last`` under a key
derived from the header, so segments need nothing from each other. Sealing: one task on a
worker builds the header (the key stays on the workers; the header is public); the
coordinator writes it into a temporary beside the destination, sized to the stream's
final length (:meth:`SegmentLayout.for_plaintext`); each task reads its plaintext range,
seals its segments by index (:meth:`SegmentLayout.seal_plan`; only the range holding the
last segment seals it as final) and writes them at their offset. Once every range is in,
the temporary is fsynced and renamed over the destination: byte for byte what one
machine writes given the same header. A range written twice (a retry after a worker
died) writes the same bytes at the same place.

Opening (verify, decrypt) maps the stream from its authenticated header and length, and
each task opens its segments by index (:meth:`SegmentLayout.open_plan`); the range that
holds the final segment proves the stream was not cut short.

Writes at offsets need a file system that takes them (local or shared: NFS, Lustre,
a FUSE mount); object stores' multipart uploads are not wired yet.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from distributed import Client

from ..abc import as_bytes
from ..codecs import SegmentLayout, container
from ..errors import InvalidParameterError, StreamCryptError
from ._jobs import ObjectResult, Progress, Summary, run_tasks, summarize
from ._keys import KeyProvider, as_provider
from ._objects import DEFAULT_CHUNK_SIZE, DEFAULT_RETRIES, check_options
from ._storage import (
    commit,
    discard,
    is_local,
    new_run_id,
    open_fs,
    remove_run_temporaries,
    temporary_path,
)

#: Plaintext bytes per task: large enough that the scheduler's per-task cost (a few ms,
#: docs/CLUSTER.md) is under 1 % of the crypto and I/O, small enough to spread a 1 GiB
#: object over many workers.
DEFAULT_RANGE_SIZE = 64 << 20


@dataclass(frozen=True, slots=True)
class RangeSpec:
    """What every range task of one object needs (pickled; no secret)."""

    operation: str  # "encrypt", "decrypt" or "verify"
    source: str
    key: KeyProvider
    head: bytes  # encrypt: the header; open: the start of the stream (header included)
    size: int  # encrypt: the plaintext size; open: the stream size
    temporary: str | None  # local path written at offsets (None: verify)
    aad: bytes = b""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    def layout(self) -> SegmentLayout:
        key = self.key.resolve()
        if self.operation == "encrypt":
            return container.sealing_layout(key, self.head, self.size, aad=self.aad)
        return container.layout(key, self.head, self.size, aad=self.aad)


def _make_header(
    key: KeyProvider, suite: str, segment_size: int, aad: bytes, salt: bytes | None,
    nonce_prefix: bytes | None, size: int,
) -> tuple[bytes, int, int]:  # fmt: skip
    """On a worker: the header, the segment count and the stream size."""
    secret = key.resolve()
    header = container.StreamEncryptor(
        secret, suite=suite, segment_size=segment_size, aad=aad, salt=salt,
        nonce_prefix=nonce_prefix,
    ).take_header()  # fmt: skip
    lay = container.sealing_layout(secret, header, size, aad=aad)
    return header, lay.segment_count, lay.stream_size


def _read_head(
    source: str, key: KeyProvider, aad: bytes, so: Mapping[str, Any]
) -> tuple[bytes, int]:
    """On a worker: the start of the stream and the segment count (header authenticated)."""
    fs, path = open_fs(source, so)
    size = fs.size(path)
    with fs.open(path, "rb") as f:
        head = f.read(container.MAX_HEADER_SIZE)
    lay = container.layout(key.resolve(), head, size, aad=aad)
    return head, lay.segment_count


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        done = os.pwrite(fd, data, offset)
        data, offset = data[done:], offset + done


def run_range(span: tuple[int, int], spec: RangeSpec) -> ObjectResult:
    """The task: segments ``[first, first + count)`` of one object (on a worker).

    Works in pieces of about ``chunk_size`` bytes, so memory stays bounded whatever the
    range. Data failures come back as a failed result; I/O errors are raised (retried).
    """
    first, count = span
    label = f"{spec.source}#segments-{first}-{first + count - 1}"
    try:
        lay = spec.layout()
        sealing = spec.operation == "encrypt"
        per = max(1, spec.chunk_size // lay.codec.full_plaintext(1))
        fs, path = open_fs(spec.source, spec.storage_options)
        fd = None if spec.temporary is None else os.open(spec.temporary, os.O_WRONLY)
        done_in = done_out = 0
        try:
            with fs.open(path, "rb") as reader:
                for piece in range(first, first + count, per):
                    n = min(per, first + count - piece)
                    plan = lay.seal_plan(piece, n) if sealing else lay.open_plan(piece, n)
                    job, offset, length, at = plan
                    reader.seek(offset)
                    job.data = reader.read(length)
                    if len(job.data) != length:
                        raise OSError(f"{spec.source} changed size while being processed")
                    out = job.run()
                    if fd is not None:
                        _pwrite_all(fd, out, at)
                    done_in, done_out = done_in + length, done_out + len(out)
            if fd is not None:
                os.fsync(fd)
        finally:
            if fd is not None:
                os.close(fd)
        return ObjectResult(label, spec.temporary, done_in, done_out)
    except StreamCryptError as exc:
        return ObjectResult(label, spec.temporary, error=type(exc).__name__, message=str(exc))


def _spans(segments: int, per: int) -> list[tuple[int, int]]:
    return [(first, min(per, segments - first)) for first in range(0, segments, per)]


def _per_task(range_size: int, segment_size: int) -> int:
    if range_size < 1:
        raise InvalidParameterError("range_size must be positive")
    return max(1, range_size // segment_size)


def _prepare_destination(dst: str, so: Mapping[str, Any], run_id: str) -> tuple[Any, str, str]:
    fs, path = open_fs(dst, so)
    if not is_local(fs):
        raise InvalidParameterError(
            "ranges are written at offsets, which needs a local or shared file system "
            f"destination; {dst!r} is on {type(fs).__name__} (use encrypt_objects there)"
        )
    fs.makedirs(posixpath.dirname(path) or ".", exist_ok=True)
    return fs, path, temporary_path(fs, path, run_id)


def _run_spans(
    client: Client,
    spec: RangeSpec,
    spans: list[tuple[int, int]],
    run_id: str,
    retries: int,
    progress: Progress | None,
) -> list[ObjectResult]:
    labels = [f"{spec.source}#segments-{a}-{a + n - 1}" for a, n in spans]
    return run_tasks(
        client, run_range, spans, spec, f"streamcrypt-{spec.operation}-range-{run_id}",
        labels, retries=retries, progress=progress,
    )  # fmt: skip


def _run(
    client: Client,
    spec: RangeSpec,
    segments: int,
    per: int,
    dst: str | None,
    retries: int,
    progress: Progress | None,
    started: float,
    header: bytes = b"",
    stream_size: int = 0,
) -> Summary:
    """Run ``spec`` over every range of ``per`` segments; with a destination, into a
    temporary holding ``header`` and sized to ``stream_size``, renamed over ``dst`` only
    if every range succeeded (else discarded)."""
    spans = _spans(segments, per)
    run_id = new_run_id()
    so = spec.storage_options
    if dst is None:
        results = _run_spans(client, spec, spans, run_id, retries, progress)
        return summarize(spec.operation, results, started, objects=1, tasks=len(spans))
    fs, dest, tmp = _prepare_destination(dst, so, run_id)
    with open(tmp, "wb") as f:
        f.write(header)
        f.truncate(stream_size)
    try:
        results = _run_spans(client, replace(spec, temporary=tmp), spans, run_id, retries, progress)
    except BaseException:
        discard(fs, tmp)
        raise
    if any(r.error is not None for r in results):
        discard(fs, tmp)
    else:
        commit(fs, tmp, dest)
    removed = remove_run_temporaries([dst], run_id, so)
    return summarize(spec.operation, results, started, objects=1, tasks=len(spans), removed=removed)


def encrypt_ranges(
    client: Client,
    src: str,
    dst: str,
    key: KeyProvider,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = container.DEFAULT_SEGMENT_SIZE,
    aad: bytes = b"",
    range_size: int = DEFAULT_RANGE_SIZE,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    salt: bytes | None = None,
    nonce_prefix: bytes | None = None,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Encrypt one object into a native container, ``range_size`` plaintext bytes per
    task (whole segments), on every worker of ``client``.

    ``salt`` and ``nonce_prefix`` fix the header's random fields (tests, reproducible
    runs); never reuse them with the same key for different data. The destination is
    replaced only once every range is in; on any failure it is left as it was.
    """
    started = time.perf_counter()
    check_options(chunk_size, suite, segment_size)
    provider = as_provider(key)
    so = dict(storage_options or {})
    per = _per_task(range_size, segment_size)
    src_fs, src_path = open_fs(src, so)
    size = src_fs.size(src_path)
    header_future = client.submit(
        _make_header, provider, suite, segment_size, as_bytes(aad, "aad"), salt, nonce_prefix, size,
        pure=False, retries=retries,
    )  # fmt: skip
    header, segments, stream_size = header_future.result()
    spec = RangeSpec(
        "encrypt", src, provider, header, size, None, as_bytes(aad, "aad"), chunk_size, so
    )
    return _run(client, spec, segments, per, dst, retries, progress, started, header, stream_size)


def _open_ranges(
    client: Client,
    operation: str,
    src: str,
    dst: str | None,
    key: KeyProvider,
    aad: bytes,
    range_size: int,
    chunk_size: int,
    retries: int,
    progress: Progress | None,
    storage_options: Mapping[str, Any] | None,
) -> Summary:
    started = time.perf_counter()
    check_options(chunk_size)
    provider = as_provider(key)
    so = dict(storage_options or {})
    src_fs, src_path = open_fs(src, so)
    size = src_fs.size(src_path)
    head, segments = client.submit(
        _read_head, src, provider, as_bytes(aad, "aad"), so, pure=False, retries=retries
    ).result()
    header = container.read_header(head)
    assert header is not None
    per = _per_task(range_size, header[0].segment_size)
    spec = RangeSpec(
        operation, src, provider, head, size, None, as_bytes(aad, "aad"), chunk_size, so
    )
    return _run(client, spec, segments, per, dst, retries, progress, started)


def verify_ranges(
    client: Client,
    src: str,
    key: KeyProvider,
    *,
    aad: bytes = b"",
    range_size: int = DEFAULT_RANGE_SIZE,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Authenticate one native container by ranges of segments on many workers; the
    summary lists each range that failed (``AuthenticationError`` for a tampered one)."""
    return _open_ranges(
        client, "verify", src, None, key, aad, range_size, chunk_size, retries, progress,
        storage_options,
    )  # fmt: skip


def decrypt_ranges(
    client: Client,
    src: str,
    dst: str,
    key: KeyProvider,
    *,
    aad: bytes = b"",
    range_size: int = DEFAULT_RANGE_SIZE,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    retries: int = DEFAULT_RETRIES,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Summary:
    """Decrypt one native container by ranges on many workers into ``dst`` (a local or
    shared file system); ``dst`` appears only if every segment verified."""
    return _open_ranges(
        client, "decrypt", src, dst, key, aad, range_size, chunk_size, retries, progress,
        storage_options,
    )  # fmt: skip
