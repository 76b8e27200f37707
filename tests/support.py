"""Shared test helpers: official vector files, vector counting, chunked feeding."""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: The official vectors, vendored (tests/vectors/README.md says where each file came from).
VECTORS = REPO / "tests" / "vectors"

#: (file, ran, expected) triples, printed at the end of the run by conftest.
VECTOR_COUNTS: list[tuple[str, int, int]] = []


def vector_path(*parts: str) -> Path:
    path = VECTORS.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"official vectors missing: {path} (see tests/vectors/README.md)")
    return path


def wycheproof(name: str) -> dict[str, Any]:
    """A Wycheproof v1 file from tests/vectors/wycheproof."""
    data: dict[str, Any] = json.loads(vector_path("wycheproof", name).read_text())
    return data


def wycheproof_cases(data: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(group, test) pairs of a Wycheproof file."""
    for group in data["testGroups"]:
        for test in group["tests"]:
            yield group, test


def record_vectors(name: str, ran: int, expected: int) -> None:
    """Record a vector count for the summary and fail if fewer ran than the file holds."""
    VECTOR_COUNTS.append((name, ran, expected))
    assert ran == expected, f"{name}: ran {ran} vectors, the file holds {expected}"


def round_trip_peak_memory(encryptor: Any, decryptor: Any, mib: int = 16) -> int:
    """Peak traced memory (bytes) while ``mib`` MiB go through ``encryptor`` into
    ``decryptor`` one MiB at a time: a streaming pair stays at a few segments."""
    import tracemalloc

    piece = bytes(1 << 20)
    tracemalloc.start()
    try:
        for _ in range(mib):
            decryptor.update(encryptor.update(piece))
        decryptor.update(encryptor.finalize())
        decryptor.finalize()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def random_splits(data: bytes, rng: random.Random, max_piece: int = 97) -> list[bytes]:
    """Cut ``data`` into random pieces, empty pieces included."""
    out: list[bytes] = []
    i = 0
    while i < len(data):
        n = rng.randint(0, max_piece)
        out.append(data[i : i + n])
        i += n
    out.append(b"")
    return out


def age_encrypt(plaintext: bytes, *, armor: bool = False, **keys: Any) -> bytes:
    """An age file of ``plaintext`` (ASCII-armored when ``armor``), made in this thread
    by the one-shot call with any of its age keywords."""
    import streamcrypt

    return streamcrypt.encrypt_bytes(plaintext, format="age", armor=armor, policy=None, **keys)


def age_decrypt(ciphertext: bytes, **keys: Any) -> bytes:
    """The plaintext of an age file, binary or armored, read in this thread by the
    one-shot call; raises what it raises, the first fault first."""
    import streamcrypt

    return streamcrypt.decrypt_bytes(ciphertext, format="age", policy=None, **keys)


def envelope_encrypt(plaintext: bytes, **options: Any) -> bytes:
    """An envelope of ``plaintext`` by :class:`EnvelopeEncryptor` (any of its keywords)."""
    from streamcrypt.codecs.envelope import EnvelopeEncryptor

    encryptor = EnvelopeEncryptor(**options)
    return encryptor.update(plaintext) + encryptor.finalize()


def envelope_decrypt(ciphertext: bytes, **options: Any) -> bytes:
    """The plaintext of an envelope by :class:`EnvelopeDecryptor` (any of its keywords)."""
    from streamcrypt.codecs.envelope import EnvelopeDecryptor

    decryptor = EnvelopeDecryptor(**options)
    return decryptor.update(ciphertext) + decryptor.finalize()


def write_secret(path: Path, content: str | bytes) -> Path:
    """Write a file that holds a secret (a key file, a passphrase) as a user should: mode
    0600, which readers expect (others may read a 0644 file: InsecureKeyFileWarning)."""
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def local_cluster() -> Iterator[Any]:
    """A Dask client on a LocalCluster of two single-thread worker processes on loopback
    (they inherit ``os.environ`` as it is when this starts). The environment is put back
    afterwards: ``distributed`` writes its workers' settings into this process's own
    (``MALLOC_TRIM_THRESHOLD_``, ``OMP_NUM_THREADS``...) and leaves them there, where
    every later test's subprocesses would inherit them."""
    from distributed import Client, LocalCluster

    saved = dict(os.environ)
    try:
        with (
            LocalCluster(
                n_workers=2,
                processes=True,
                threads_per_worker=1,
                host="127.0.0.1",
                dashboard_address=":0",  # None means the fixed 8787, taken by a second run
            ) as lc,
            Client(lc) as client,
        ):
            yield client
    finally:
        os.environ.clear()
        os.environ.update(saved)
