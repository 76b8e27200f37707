"""The record layer of :class:`~streamcrypt.transports.EncryptedStream`, sans-I/O.

Theory of operation
-------------------
After the Noise handshake each direction is a sequence of records::

    length (2 bytes, big-endian)  type (1 byte)  Noise transport message (length bytes)

The message is ``CipherState.encrypt(ad=header, plaintext)`` where ``header`` is the 3
bytes in front of it, so length and type are authenticated too. Types: ``DATA`` and
``CLOSE`` (empty plaintext: the authenticated end of the stream). A record carries at
most :data:`MAX_RECORD_DATA` bytes. Nonces are the Noise counters; every
``rekey_interval`` records a direction calls ``CipherState.rekey()``.

Work is split as everywhere in streamcrypt: :func:`take_nonces` assigns keys and nonces
to the next records of a direction (on the loop thread, in order, before anything is
dispatched), and :class:`SealRecords` / :class:`OpenRecords` are pure jobs over runs of
consecutive records that the engine's scheduler runs inline or on workers.
"""

from __future__ import annotations

from typing import Final

from .._state import Buffer
from ..errors import LimitExceededError, StreamCryptError
from .noise import MAX_MESSAGE_LEN, MAX_NONCE, TAGLEN, CipherState, FixedKeyCipher

__all__ = [
    "CLOSE",
    "DATA",
    "HEADER_LEN",
    "MAX_RECORD_DATA",
    "RECORDS_PER_JOB",
    "WIRE_OVERHEAD",
    "OpenRecords",
    "Run",
    "SealRecords",
    "record_count",
    "scan_data_records",
    "take_nonces",
]

#: Record type: application data.
DATA: Final = 0
#: Record type: the authenticated end of the stream (empty plaintext).
CLOSE: Final = 1
#: Bytes in front of each Noise message: length (2) and type (1).
HEADER_LEN: Final = 3
#: The most plaintext one record carries: the Noise message limit minus the tag.
MAX_RECORD_DATA: Final = MAX_MESSAGE_LEN - TAGLEN
#: Bytes a record adds to its data on the wire: the header and the tag.
WIRE_OVERHEAD: Final = HEADER_LEN + TAGLEN
#: Full records per job: about the engine's claim size (256 KiB).
RECORDS_PER_JOB: Final = 4

#: ``(key, first nonce, records)``: consecutive records sealed or opened under one key.
Run = tuple[FixedKeyCipher, int, int]


def record_count(size: int) -> int:
    """Records needed for ``size`` bytes of data (an empty item is one empty record)."""
    return max(1, -(-size // MAX_RECORD_DATA))


def take_nonces(cs: CipherState, done: int, count: int, interval: int | None) -> list[Run]:
    """Assign keys and nonces to the next ``count`` records of one direction.

    ``done`` is the number of records of that direction so far. Rekeys fall between
    runs, so a batch may span a rekey: each run carries its own key. The CipherState
    moves past the records. Raises :class:`LimitExceededError` when nonces run out.
    """
    runs: list[Run] = []
    while count:
        take = count if interval is None else min(count, interval - done % interval)
        first = cs.nonce
        if first + take >= MAX_NONCE:
            raise LimitExceededError(
                "Noise nonce space exhausted (2**64-1 records): start a new connection"
            )
        runs.append((cs.fixed_key(), first, take))
        cs.set_nonce(first + take)
        done += take
        count -= take
        if interval is not None and done % interval == 0:
            cs.rekey()
    return runs


def _records(runs: list[Run]) -> list[tuple[FixedKeyCipher, int]]:
    return [(key, n) for key, first, count in runs for n in range(first, first + count)]


class SealRecords:
    """Seal ``data`` as consecutive records of type ``rtype`` (a pure job, any thread)."""

    __slots__ = ("_data", "_rtype", "_runs", "out_size")

    def __init__(self, runs: list[Run], rtype: int, data: Buffer) -> None:
        self._runs = runs
        self._rtype = rtype
        self._data = data
        self.out_size = len(data) + record_count(len(data)) * WIRE_OVERHEAD

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        data = memoryview(self._data)
        src = dst = 0
        try:
            for key, n in _records(self._runs):
                chunk = data[src : src + MAX_RECORD_DATA]
                length = len(chunk) + TAGLEN
                header = bytes((length >> 8, length & 0xFF, self._rtype))
                out[dst : dst + HEADER_LEN] = header
                body = dst + HEADER_LEN
                key.seal_into(n, header, chunk, out[body : body + length])
                src += len(chunk)
                dst = body + length
        except Exception as exc:
            return dst, exc
        return dst, None


class OpenRecords:
    """Open consecutive complete data records (a pure job, any thread); stops at the
    first that fails, keeping the plaintext of those before it."""

    __slots__ = ("_data", "_runs", "out_size")

    def __init__(self, runs: list[Run], data: memoryview, count: int) -> None:
        self._runs = runs
        self._data = data
        self.out_size = len(data) - count * WIRE_OVERHEAD

    def run_into(self, out: memoryview) -> tuple[int, Exception | None]:
        data = self._data
        pos = written = 0
        try:
            for key, n in _records(self._runs):
                length = (data[pos] << 8) | data[pos + 1]
                body = pos + HEADER_LEN
                size = length - TAGLEN
                key.open_into(
                    n, data[pos:body], data[body : body + length], out[written : written + size]
                )
                written += size
                pos = body + length
        except StreamCryptError as exc:
            return written, exc
        return written, None


def scan_data_records(buf: Buffer, pos: int, budget: int) -> list[tuple[int, int, int]]:
    """Runs of complete data records from ``pos``: ``(start, end, records)`` each, at most
    :data:`RECORDS_PER_JOB` records per run and about ``budget`` bytes of data in all.

    Stops at the first record that is incomplete, malformed or not of type ``DATA``
    (left for the caller, which raises for a malformed one).
    """
    size = len(buf)
    runs: list[tuple[int, int, int]] = []
    start = pos
    count = data = 0
    while size - pos >= HEADER_LEN and buf[pos + 2] == DATA and data < budget:
        length = (buf[pos] << 8) | buf[pos + 1]
        end = pos + HEADER_LEN + length
        if length < TAGLEN or end > size:
            break
        pos = end
        count += 1
        data += length - TAGLEN
        if count == RECORDS_PER_JOB:
            runs.append((start, pos, count))
            start, count = pos, 0
    if count:
        runs.append((start, pos, count))
    return runs
