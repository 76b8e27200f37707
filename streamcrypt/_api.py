"""The high-level names: encrypt/decrypt bytes and async streams in the native container."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ._state import Buffer
from .codecs._segmented import SegmentedTransform, SegmentJob
from .codecs.container import DEFAULT_SEGMENT_SIZE, KeyLike, StreamDecryptor, StreamEncryptor
from .engine import DEFAULT_POLICY, OffloadPolicy, Source, pipeline

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "run_segmented"]


def run_segmented(
    transform: SegmentedTransform, data: Buffer, policy: OffloadPolicy | None = DEFAULT_POLICY
) -> bytes:
    """Run a segmented transform over all of ``data`` at once, in parallel when it is large.

    Synchronous: batches go to the policy's worker threads and this call waits for them.
    Errors come out after nothing is returned (one-shot calls release all or nothing).
    A one-shot call must return fresh memory, and on this project's machine first-touch
    page faults cost ~0.5 ms per MiB, more than AES-GCM itself: for large data the
    streaming API (reused buffers) is the fast path.
    """
    view = memoryview(data).cast("B")
    step = policy.batch_size if policy is not None else max(len(view), 1)
    jobs: list[SegmentJob] = []
    for off in range(0, len(view), step):
        jobs += transform.feed(view[off : off + step])
    jobs += transform.finish()
    header = transform.take_header()
    # One output buffer; each job writes its own slice (in parallel when large). A fresh
    # buffer per job would cost a page fault per 4 KiB, more than the cipher itself.
    out = memoryview(bytearray(sum(job.out_size for job in jobs)))
    slices, pos = [], 0
    for job in jobs:
        slices.append(out[pos : pos + job.out_size])
        pos += job.out_size
    try:
        if policy is None or len(view) < policy.inline_limit or len(jobs) < 2:
            written = [job.run(piece) for job, piece in zip(jobs, slices, strict=True)]
        else:
            futures = [
                policy.submit(job.run, piece) for job, piece in zip(jobs, slices, strict=True)
            ]
            written = [f.result() for f in futures]
    except Exception as exc:
        raise transform.fail(exc) from None
    return b"".join([header, *written])


def encrypt_bytes(
    plaintext: Buffer,
    key: KeyLike,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into a native container (see docs/FORMAT.md)."""
    enc = StreamEncryptor(key, suite=suite, segment_size=segment_size, aad=aad)
    return run_segmented(enc, plaintext, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: KeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole native container. Raises AuthenticationError, TruncatedStreamError,
    FormatError, UnsupportedFormatError or UnknownKeyError; returns nothing on failure."""
    return run_segmented(StreamDecryptor(key, aad=aad), ciphertext, policy)


def encrypt(
    source: Source,
    key: KeyLike,
    *,
    suite: str = "aes-256-gcm",
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source (iterable of bytes, anyio byte stream) as it streams.

    Key and parameter errors are raised here, at the call; the result is an async
    iterator of ciphertext chunks.
    """
    enc = StreamEncryptor(key, suite=suite, segment_size=segment_size, aad=aad)
    return pipeline(enc, policy=policy).stream(source)


def decrypt(
    source: Source,
    key: KeyLike,
    *,
    aad: Buffer = b"",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an async source of container bytes, yielding only verified plaintext.

    Raises (while iterating) AuthenticationError, TruncatedStreamError, FormatError,
    UnsupportedFormatError, UnknownKeyError.
    """
    return pipeline(StreamDecryptor(key, aad=aad), policy=policy).stream(source)
