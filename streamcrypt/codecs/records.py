"""The EncryptedStream protocol, sans-I/O: preamble, Noise handshake framing and records.

Theory of operation
-------------------
A connection runs in two phases over one byte stream; this module is both of them as
pure state machines (the h11 lesson), and :class:`~streamcrypt.transports.EncryptedStream`
only moves bytes between them and a transport, as anyio's ``TLSStream`` does around
``ssl.MemoryBIO``.

**Handshake** (:class:`Handshake`). The client opens with a 6-byte *preamble* naming what
it is about to run::

    b"sc"  version (2)  pattern id  cipher id  hash id

    pattern id: 1 NNpsk0, 2 NK, 3 IK, 4 XX     cipher id: 1 ChaChaPoly, 2 AESGCM
    hash id:    1 SHA256, 2 SHA512, 3 BLAKE2s, 4 BLAKE2b

The pattern follows from the keys each side holds (:meth:`ProtocolConfig.client_pattern`).
The cipher is the client's choice among those both sides allow: a side configured with
``cipher="auto"`` allows both and, as a client, proposes AES-GCM where the CPU has AES
and carry-less multiply instructions and ChaCha20-Poly1305 elsewhere or when it cannot
tell (:func:`preferred_cipher`, from CPU flags as TLS stacks decide, never from a
timing); a side configured with one cipher insists on it. The server
checks the preamble against its configuration and refuses anything else. The Noise
prologue is ``b"streamcrypt EncryptedStream\\x00"`` followed by the preamble, so a
preamble changed on the wire makes the handshake fail. Then the Noise handshake messages
(``Noise_<pattern>_25519_<cipher>_<hash>``, empty payloads) travel each behind a 2-byte
big-endian length. A server that takes no more connections sends, instead of its first
message, a zero-length frame and a reason byte (:data:`REFUSED_BUSY`: ``00 00 01``,
busy), which the client raises as :class:`HandshakeError`, and closes.

*Key confirmation.* Where the server writes the last handshake message (NNpsk0, NK, IK),
nothing it has read proves that the client holds this session's keys: the first message
does not depend on the server's fresh ephemeral key, so an eavesdropper's replay of it
reads as a new client. So the client's first record, sent as soon as it has read the
server's last message (before any data, waiting for nothing: no round trip is added, and
a client that only receives sends it too), is a ``CONFIRM`` record (empty,
sealed as any record under its send state, and counted as one: nonce 0), and the server
holds the handshake open, under the handshake timeout, until that record opens under its
receive state; anything else fails the handshake. Where the client writes last (XX), the
server's reading of that message is the confirmation. In every pattern the machine
returns :class:`Complete` only once this is done (version 1 had no confirmation).

*Vetting.* When the server's static key arrives (XX message 2) the client pauses with a
:class:`VetPeer` event until the caller vets it; the server vets the client's key (IK, XX)
only once the client is confirmed, so a replayed first message never reaches it.

**Records** (:class:`RecordStream`). After ``split()`` each direction is a sequence of::

    length (2 bytes, big-endian)  type (1 byte)  Noise transport message (length bytes)

The message is ``CipherState.encrypt(ad=header, plaintext)`` where ``header`` is the 3
bytes in front of it, so length and type are authenticated too. Types: ``DATA`` (0),
``CLOSE`` (1, empty: the authenticated end of the stream) and ``CONFIRM`` (2, empty: the
client's key confirmation, its first record where the server wrote the last handshake
message, and nowhere else). A record carries at most
:data:`MAX_RECORD_DATA` bytes. Nonces are the Noise counters; every ``rekey_interval``
records a direction calls ``CipherState.rekey()``. Keys and nonces are assigned on the
caller's thread, in order (:func:`take_nonces`); sealing and opening are pure jobs over
runs of consecutive records (:class:`SealRecords`, :class:`OpenRecords`) that the
engine's scheduler runs inline or on workers. Small work needs no job: one record is
sealed by :meth:`RecordStream.seal` and buffered records are opened one by one by
:meth:`RecordStream.next_control`, at once on the caller's thread (a scheduler's
batch costs more Python than a 1 KiB record costs AES-GCM).

The record layer is *not* wire-compatible with a bare Noise transport (the type byte and
the header AD); the handshake is plain Noise.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ..abc import Buffer, as_bytes
from ..errors import (
    FormatError,
    HandshakeError,
    InvalidKeySizeError,
    InvalidParameterError,
    LimitExceededError,
    StreamCryptError,
    UnsupportedFormatError,
)
from ..keys import HoldsSecrets, SecretKey
from .noise import (
    MAX_MESSAGE_LEN,
    MAX_NONCE,
    TAGLEN,
    CipherState,
    FixedKeyCipher,
    NoiseHandshake,
    NoiseProtocolName,
)

__all__ = [
    "CIPHERS",
    "CLOSE",
    "CONFIRM",
    "DATA",
    "DEFAULT_REKEY_INTERVAL",
    "HASHES",
    "HEADER_LEN",
    "MAX_RECORD_DATA",
    "PATTERNS",
    "RECORDS_PER_JOB",
    "REFUSED_BUSY",
    "WIRE_OVERHEAD",
    "Complete",
    "Handshake",
    "HandshakeEvent",
    "NeedData",
    "OpenRecords",
    "ProtocolConfig",
    "RecordStream",
    "Run",
    "SealRecords",
    "VetPeer",
    "preferred_cipher",
    "record_count",
    "scan_data_records",
    "take_nonces",
]

#: Record type: application data.
DATA: Final = 0
#: Record type: the authenticated end of the stream (empty plaintext).
CLOSE: Final = 1
#: Record type: the client's key confirmation (empty plaintext), its first record where
#: the server writes the last handshake message (NNpsk0, NK, IK).
CONFIRM: Final = 2
#: Bytes in front of each Noise message: length (2) and type (1).
HEADER_LEN: Final = 3
#: The most plaintext one record carries: the Noise message limit minus the tag.
MAX_RECORD_DATA: Final = MAX_MESSAGE_LEN - TAGLEN
#: Bytes a record adds to its data on the wire: the header and the tag.
WIRE_OVERHEAD: Final = HEADER_LEN + TAGLEN
#: Full records per job: about the engine's claim size (256 KiB).
RECORDS_PER_JOB: Final = 4
#: Records per direction between two ``CipherState.rekey()`` calls (<= 4 GiB per key).
DEFAULT_REKEY_INTERVAL: Final = 65536

MAGIC: Final = b"sc"
VERSION: Final = 2
PREAMBLE_LEN: Final = 6
PROLOGUE: Final = b"streamcrypt EncryptedStream\x00"
#: Noise patterns a preamble may name, with their wire codes.
PATTERNS: Final = {"NNpsk0": 1, "NK": 2, "IK": 3, "XX": 4}
#: Noise ciphers a preamble may name, with their wire codes.
CIPHERS: Final = {"ChaChaPoly": 1, "AESGCM": 2}
#: Noise hashes a preamble may name, with their wire codes.
HASHES: Final = {"SHA256": 1, "SHA512": 2, "BLAKE2s": 3, "BLAKE2b": 4}
#: What a server sends instead of its first handshake message when it serves as many
#: connections as it takes: a zero-length frame (never a Noise message) and reason 1.
REFUSED_BUSY: Final = b"\x00\x00\x01"
_REFUSALS: Final = {
    1: "it serves as many connections as it takes (max_connections); try again later",
}
#: Handshake messages here carry empty payloads (at most 96 bytes); anything far larger
#: is not a streamcrypt peer.
MAX_HANDSHAKE_FRAME: Final = 1024

#: ``(key, first nonce, records)``: consecutive records sealed or opened under one key.
Run = tuple[FixedKeyCipher, int, int]


#: CPU flags that make AES-GCM fast and constant-time in hardware: AES rounds and
#: carry-less multiplication (GHASH). x86 ``/proc/cpuinfo`` names them ``aes`` and
#: ``pclmulqdq`` (``vaes``/``vpclmulqdq`` are their wide forms, never present without
#: them); ARMv8 names them ``aes`` and ``pmull``.
_AES_FLAGS: Final = frozenset({"aes"})
_CLMUL_FLAGS: Final = frozenset({"pclmulqdq", "pmull"})


@functools.cache
def _cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's first CPU from ``/proc/cpuinfo``
    (x86 ``flags``, ARM ``Features``); empty where the file is absent (macOS, BSD,
    Windows) or unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip().lower() in ("flags", "features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def preferred_cipher(flags: Iterable[str] | None = None) -> str:
    """The cipher a client with ``cipher="auto"`` proposes: ``"AESGCM"`` when the CPU has
    AES and carry-less multiply instructions (``flags``; ``None``: this machine's, from
    ``/proc/cpuinfo``), else ``"ChaChaPoly"``, which is fast and constant-time in
    software, and the choice when the flags are unknown. Decided from CPU features, as
    TLS stacks do, so the same machine always proposes the same cipher."""
    have = _cpu_flags() if flags is None else frozenset(flags)
    if have & _AES_FLAGS and have & _CLMUL_FLAGS:
        return "AESGCM"
    return "ChaChaPoly"


@functools.cache
def _protocol_name(name: str) -> NoiseProtocolName:
    """A protocol name parsed once per process (frozen: every handshake shares it)."""
    return NoiseProtocolName.parse(name)


def _raw_key(key: Buffer | SecretKey, what: str) -> bytes:
    raw = key.secret_bytes() if isinstance(key, SecretKey) else bytes(key)
    if len(raw) != 32:
        raise InvalidKeySizeError(f"{what} must be 32 bytes, got {len(raw)}")
    return raw


@dataclass(frozen=True, slots=True, repr=False)
class ProtocolConfig(HoldsSecrets):
    """One side's protocol options, validated (secrets inside: never repr'd).

    ``cipher``: ``"auto"`` (allow both, propose :func:`preferred_cipher`), or
    ``"AESGCM"`` / ``"ChaChaPoly"`` to insist; ``hash`` must match on both sides.
    """

    server_side: bool
    psk: bytes | None
    static_key: bytes | None
    server_public_key: bytes | None
    vets_peers: bool
    cipher: str
    hash: str
    rekey_interval: int | None
    #: ``static_key`` loaded once (loading derives the public key, a scalar multiplication):
    #: a listener's handshakes share it.
    static_private: X25519PrivateKey | None = field(default=None, compare=False)

    @classmethod
    def make(
        cls,
        *,
        server_side: bool,
        psk: Buffer | SecretKey | None = None,
        static_key: Buffer | SecretKey | None = None,
        server_public_key: Buffer | None = None,
        vets_peers: bool = False,
        cipher: str = "auto",
        hash: str = "BLAKE2s",
        rekey_interval: int | None = DEFAULT_REKEY_INTERVAL,
    ) -> ProtocolConfig:
        """Check the options; raises :class:`InvalidParameterError` / :class:`InvalidKeySizeError`."""
        raw_psk, raw_static, raw_server = cls.check_keys(
            psk=psk,
            static_key=static_key,
            server_public_key=server_public_key,
            cipher=cipher,
            hash=hash,
            rekey_interval=rekey_interval,
        )
        if server_side:
            if raw_server is not None:
                raise InvalidParameterError(
                    "server_public_key= is for the client; the server gives static_key="
                )
            if raw_psk is None and raw_static is None:
                raise InvalidParameterError("the server needs psk= or static_key=")
        elif raw_psk is None and raw_server is None:
            if raw_static is None:
                raise InvalidParameterError(
                    "the client needs psk=, server_public_key= or static_key= (with accept_peer=)"
                )
            if not vets_peers:
                raise InvalidParameterError(
                    "XX (static_key= without server_public_key=) needs accept_peer= to vet "
                    "the server's key; without it any server would be accepted"
                )
        return cls(
            server_side,
            raw_psk,
            raw_static,
            raw_server,
            vets_peers,
            cipher,
            hash,
            rekey_interval,
            None if raw_static is None else X25519PrivateKey.from_private_bytes(raw_static),
        )

    @staticmethod
    def check_keys(
        *,
        psk: Buffer | SecretKey | None,
        static_key: Buffer | SecretKey | None,
        server_public_key: Buffer | None,
        cipher: str,
        hash: str,
        rekey_interval: int | None,
    ) -> tuple[bytes | None, bytes | None, bytes | None]:
        """The checks that do not depend on the side; returns the raw keys."""
        if cipher != "auto" and cipher not in CIPHERS:
            raise InvalidParameterError(
                f"unsupported cipher {cipher!r}; use 'auto' or one of {', '.join(CIPHERS)}"
            )
        if hash not in HASHES:
            raise InvalidParameterError(
                f"unsupported hash {hash!r}; use one of {', '.join(HASHES)}"
            )
        if rekey_interval is not None and (isinstance(rekey_interval, bool) or rekey_interval < 1):
            raise InvalidParameterError(
                f"rekey_interval must be a positive number of records or None, got {rekey_interval!r}"
            )
        raw_psk = _raw_key(psk, "psk") if psk is not None else None
        raw_static = _raw_key(static_key, "static_key") if static_key is not None else None
        raw_server = None
        if server_public_key is not None:
            raw_server = bytes(server_public_key)
            if len(raw_server) != 32:
                raise InvalidKeySizeError(
                    f"server_public_key must be a 32-byte X25519 public key, got {len(raw_server)}"
                )
        if raw_psk is not None and (raw_static is not None or raw_server is not None):
            raise InvalidParameterError(
                "psk= cannot be combined with static keys: give psk= alone (NNpsk0) or "
                "static_key=/server_public_key= (NK, IK, XX)"
            )
        return raw_psk, raw_static, raw_server

    def client_pattern(self) -> str:
        if self.psk is not None:
            return "NNpsk0"
        if self.server_public_key is not None:
            return "IK" if self.static_key is not None else "NK"
        return "XX"

    def server_refusal(self, pattern: str, cipher: str, hash_name: str) -> str | None:
        """Why this server refuses what a client asked for, or ``None`` if it accepts."""
        if self.cipher not in ("auto", cipher) or hash_name != self.hash:
            wanted = "AESGCM or ChaChaPoly" if self.cipher == "auto" else self.cipher
            return (
                f"the client asked for {cipher}/{hash_name}, this server runs "
                f"{wanted}/{self.hash}: configure both sides alike"
            )
        if self.psk is not None:
            if pattern == "NNpsk0":
                return None
            return f"the client asked for Noise {pattern}, but this server expects a pre-shared key (NNpsk0)"
        if pattern == "NNpsk0":
            return "the client asked for Noise NNpsk0, but this server has no pre-shared key; it uses static keys (NK, IK, XX)"
        if pattern == "NK" and self.vets_peers:
            return "the client asked for Noise NK, but this server vets client keys (accept_peer=) and refuses anonymous NK clients"
        return None

    def __repr__(self) -> str:
        side = "server" if self.server_side else "client"
        return f"ProtocolConfig({side}, {self.cipher}, {self.hash}, <keys hidden>)"

    __str__ = __repr__

    _pickle_advice = "build it where it is used, from keys loaded there"


# ---------------------------------------------------------------------------------------
# Handshake
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NeedData:
    """The handshake waits for bytes from the peer (``receive_data``)."""


@dataclass(frozen=True, slots=True)
class VetPeer:
    """The peer's static key arrived: vet it, then call :meth:`Handshake.vetted`."""

    public_key: bytes


@dataclass(frozen=True, slots=True, repr=False)
class Complete:
    """The handshake is done and the peer confirmed: the record layer and what was agreed."""

    protocol_name: str
    peer_static: bytes | None
    handshake_hash: bytes
    #: the record layer, holding the peer's first records that came with the handshake
    records: RecordStream

    def __repr__(self) -> str:
        return f"Complete({self.protocol_name})"


#: What :meth:`Handshake.next_event` returns: wait for data, vet the peer, or done.
HandshakeEvent = NeedData | VetPeer | Complete


class Handshake:
    """One side's handshake as a state machine: ``receive_data`` / ``data_to_send`` /
    ``next_event``. Failures raise :class:`HandshakeError`, :class:`FormatError` or
    :class:`UnsupportedFormatError` (then the connection must be closed).

    :class:`Complete` comes only once the peer is confirmed: on the server, once a
    message sealed under keys that depend on this connection's ephemeral key has opened
    (the client's last handshake message, or its key confirmation record where the
    server writes the last message), so a replayed first message never completes; on
    the client, once the server's last message has been read. The server vets the
    client's static key at that point, the client vets the server's as it arrives.
    """

    def __init__(self, config: ProtocolConfig) -> None:
        self._config = config
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._noise: NoiseHandshake | None = None
        self._records: RecordStream | None = None
        self._confirmed = False
        self._vetted = False
        self._awaiting_vet = False
        self._preamble = b""
        if not config.server_side:
            pattern = config.client_pattern()
            cipher = preferred_cipher() if config.cipher == "auto" else config.cipher
            self._preamble = MAGIC + bytes(
                (VERSION, PATTERNS[pattern], CIPHERS[cipher], HASHES[config.hash])
            )
            static = config.static_private if pattern in ("IK", "XX") else None
            self._start(pattern, cipher, static, config.server_public_key)
            self._outbox += self._preamble

    def _start(
        self, pattern: str, cipher: str, static: X25519PrivateKey | None, remote: bytes | None
    ) -> None:
        config = self._config
        self._noise = NoiseHandshake(
            _protocol_name(f"Noise_{pattern}_25519_{cipher}_{config.hash}"),
            not config.server_side,
            s=static,
            rs=remote,
            psks=[config.psk] if config.psk is not None else [],
            prologue=PROLOGUE + self._preamble,
        )
        # A key we were given is vetted by the giving; one that arrives must be vetted.
        self._vetted = self._noise.remote_static is not None or not config.vets_peers

    def receive_data(self, data: Buffer) -> None:
        self._inbox += data

    def data_to_send(self) -> bytes:
        out = bytes(self._outbox)
        self._outbox.clear()
        return out

    def vetted(self) -> None:
        """The caller accepted the key of the last :class:`VetPeer` event."""
        self._awaiting_vet = False
        self._vetted = True

    def next_event(self) -> HandshakeEvent:
        """Advance as far as the bytes received allow."""
        if self._awaiting_vet:
            raise HandshakeError("vet the peer's key (vetted()) before the handshake goes on")
        if self._noise is None and not self._read_preamble():
            return NeedData()
        noise = self._noise
        assert noise is not None
        server = self._config.server_side
        while not noise.complete:
            if noise.needs_write:
                sent = noise.write_message()
                self._outbox += len(sent).to_bytes(2, "big") + sent
                continue
            message = self._take_frame(noise.message_index)
            if message is None:
                return NeedData()
            noise.read_message(message)
            if not server and not self._vetted and noise.remote_static is not None:
                return self._vet(noise.remote_static)
        if self._records is None:
            self._split(noise)
        if not self._confirmed and not self._read_confirmation():
            return NeedData()
        if not self._vetted and noise.remote_static is not None:
            return self._vet(noise.remote_static)  # the server's vetting: a confirmed key
        records = self._records
        assert records is not None
        return Complete(noise.protocol_name, noise.remote_static, noise.handshake_hash, records)

    def _vet(self, public_key: bytes) -> VetPeer:
        self._awaiting_vet = True
        return VetPeer(public_key)

    def _split(self, noise: NoiseHandshake) -> None:
        """The record layer from the final keys. Where the server wrote the last
        handshake message, nothing it read yet proves the client's keys (a replayed first
        message reads the same): the client sends a key confirmation record first, as its
        first record, and the server waits for it."""
        send, receive = noise.split()
        records = RecordStream(send, receive, self._config.rekey_interval, bytes(self._inbox))
        self._inbox.clear()
        self._records = records
        confirm = not noise.protocol.pattern.last_by_initiator
        if confirm and noise.initiator:
            self._outbox += records.seal(CONFIRM, b"")
        self._confirmed = not (confirm and self._config.server_side)

    def _read_confirmation(self) -> bool:
        """Open the client's key confirmation record once it has all come (the server
        side); raises :class:`HandshakeError` for anything else."""
        records = self._records
        assert records is not None
        if self._inbox:
            records.receive_data(bytes(self._inbox))
            self._inbox.clear()
        try:
            record = records.next_control()
        except StreamCryptError as exc:
            raise HandshakeError(
                "the client's key confirmation did not open: the first handshake message "
                "was replayed by someone without the client's keys, or the stream is corrupt"
            ) from exc
        if record is None:
            return False
        if record != (CONFIRM, b""):
            raise HandshakeError(
                f"the client sent a record of type {record[0]} where its key confirmation "
                "belongs: it is not a conformant EncryptedStream client"
            )
        self._confirmed = True
        return True

    def _read_preamble(self) -> bool:
        if len(self._inbox) < PREAMBLE_LEN:
            return False
        pre = bytes(self._inbox[:PREAMBLE_LEN])
        del self._inbox[:PREAMBLE_LEN]
        if pre[:2] != MAGIC:
            raise FormatError(
                "the client did not open with the EncryptedStream preamble: it is not a "
                "streamcrypt client (or speaks another protocol on this port)"
            )
        if pre[2] != VERSION:
            raise UnsupportedFormatError(
                f"the client speaks EncryptedStream version {pre[2]}; this side speaks "
                f"{VERSION}: upgrade the older side"
            )
        names = []
        for byte, table, what in (
            (pre[3], PATTERNS, "pattern"),
            (pre[4], CIPHERS, "cipher"),
            (pre[5], HASHES, "hash"),
        ):
            found = [k for k, v in table.items() if v == byte]
            if not found:
                raise UnsupportedFormatError(
                    f"the client asked for unknown {what} id {byte}: not a version "
                    f"{VERSION} EncryptedStream client"
                )
            names.append(found[0])
        pattern, cipher, hash_name = names
        refusal = self._config.server_refusal(pattern, cipher, hash_name)
        if refusal is not None:
            raise HandshakeError(refusal)
        self._preamble = pre
        static = self._config.static_private if pattern != "NNpsk0" else None
        self._start(pattern, cipher, static, None)
        return True

    def _take_frame(self, index: int) -> bytes | None:
        inbox = self._inbox
        if len(inbox) < 2:
            return None
        length = int.from_bytes(inbox[:2], "big")
        if length == 0 and not self._config.server_side:
            if len(inbox) < 3:
                return None
            reason = _REFUSALS.get(inbox[2], f"reason {inbox[2]}, unknown to this version")
            raise HandshakeError(f"the server refused the connection: {reason}")
        if length > MAX_HANDSHAKE_FRAME:
            raise FormatError(
                f"handshake message {index} claims {length} bytes, over the "
                f"{MAX_HANDSHAKE_FRAME} a streamcrypt peer sends: not an EncryptedStream peer"
            )
        if len(inbox) < 2 + length:
            return None
        message = bytes(inbox[2 : 2 + length])
        del inbox[: 2 + length]
        return message

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed (a stalled peer's partial message)."""
        return len(self._inbox)


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------


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
    (left for :meth:`RecordStream.next_control`, which raises for a malformed one).
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


class RecordStream:
    """Both directions' record state after the handshake, sans-I/O.

    Sending: :meth:`seal` (one record, inline) or :meth:`seal_jobs`. Receiving:
    :meth:`receive_data`, then :meth:`open_jobs` for the complete data records at the
    head of the buffer, or :meth:`next_control` for one record of any type opened inline
    (a malformed one raises).
    """

    def __init__(
        self,
        send: CipherState,
        receive: CipherState,
        rekey_interval: int | None,
        leftover: bytes = b"",
    ) -> None:
        self._send = send
        self._receive = receive
        self._interval = rekey_interval
        self._sent = 0
        self._received = 0
        # Received bytes are parsed where they came: ``_buf`` is a chunk as the transport
        # gave it (never written to, so jobs may keep views of it), or a small copy of
        # the one record that spanned two chunks, with the rest of the second in ``_next``.
        self._buf: Buffer = leftover
        self._pos = 0
        self._next: Buffer | None = None

    # -- sending ---------------------------------------------------------------------------

    def seal(self, rtype: int, data: Buffer) -> bytes:
        """One record of type ``rtype`` sealing ``data`` now, on the caller's thread: the
        wire bytes (header and Noise message). The small-write path, with no job: at
        most :data:`MAX_RECORD_DATA` bytes (more raises :class:`LimitExceededError`).
        Raises :class:`LimitExceededError` when nonces run out."""
        size = len(data) + TAGLEN
        if size > MAX_MESSAGE_LEN:
            raise LimitExceededError(
                f"a record carries at most {MAX_RECORD_DATA} bytes, got {len(data)}: use seal_jobs"
            )
        cs = self._send
        if cs.nonce + 1 >= MAX_NONCE:  # the bound take_nonces keeps
            raise LimitExceededError(
                "Noise nonce space exhausted (2**64-1 records): start a new connection"
            )
        header = bytes((size >> 8, size & 0xFF, rtype))
        sealed = header + cs.encrypt(header, data)
        self._sent += 1
        if self._interval is not None and self._sent % self._interval == 0:
            cs.rekey()
        return sealed

    def seal_jobs(self, rtype: int, view: memoryview) -> list[SealRecords]:
        """Jobs sealing ``view`` as records (at least one), keys and nonces assigned now."""
        step = RECORDS_PER_JOB * MAX_RECORD_DATA
        jobs: list[SealRecords] = []
        offset = 0
        while True:
            piece = view[offset : offset + step]
            count = record_count(len(piece))
            runs = take_nonces(self._send, self._sent, count, self._interval)
            self._sent += count
            jobs.append(SealRecords(runs, rtype, piece))
            offset += len(piece)
            if offset >= len(view):
                return jobs

    # -- receiving -------------------------------------------------------------------------

    def receive_data(self, data: Buffer) -> None:
        """Take the next chunk of ciphertext, parsed in place: it is not copied (a
        ``bytes`` chunk is kept as it is, other buffers are copied once), except that the
        one record spanning the previous chunk and this one is copied out whole. Buffered
        bytes are thus at most one chunk plus one record."""
        chunk = as_bytes(data, "data")
        buf, pos, after = self._buf, self._pos, self._next
        rest = len(buf) - pos
        if not rest and after is None:
            self._buf, self._pos = chunk, 0
            return
        if after is not None or self._head_complete():
            # Called with complete records still unparsed (not the adapter's pattern):
            # join everything, correct if not copy-free.
            parts = [memoryview(buf)[pos:], after or b"", chunk]
            self._buf, self._pos, self._next = b"".join(parts), 0, None
            return
        with memoryview(buf) as view:
            carry = bytearray(view[pos:])
        take = len(chunk)
        if rest + take >= HEADER_LEN:
            head = (
                bytes(carry[:HEADER_LEN])
                if rest >= HEADER_LEN
                else bytes(carry) + chunk[: HEADER_LEN - rest]
            )
            length = (head[0] << 8) | head[1]
            # A malformed length is left for next_control to refuse, with the header.
            need = HEADER_LEN + length - rest if length >= TAGLEN else HEADER_LEN - rest
            take = min(take, max(need, 0))
        with memoryview(chunk) as view:
            carry += view[:take]
            self._next = view[take:] if take < len(chunk) else None
        self._buf, self._pos = carry, 0

    def _head_complete(self) -> bool:
        """Whether the buffered bytes at the head hold a whole record (or a bad header)."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < HEADER_LEN:
            return False
        length = (buf[pos] << 8) | buf[pos + 1]
        return length < TAGLEN or len(buf) - pos >= HEADER_LEN + length

    def _advance(self) -> None:
        """Past the end of the spanning record's copy: go on with the rest of the chunk."""
        if self._pos == len(self._buf) and self._next is not None:
            self._buf, self._pos, self._next = self._next, 0, None

    @property
    def received(self) -> int:
        """Records of the peer taken so far (opened, or handed to opening jobs): when it
        moves, the partial record buffered, if any, is a new one."""
        return self._received

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out (at most part of one record once
        :meth:`open_jobs` and :meth:`next_control` have nothing more to give)."""
        after = self._next
        return len(self._buf) - self._pos + (0 if after is None else len(after))

    def open_jobs(self, budget: int) -> list[OpenRecords]:
        """Jobs opening the complete data records at the head (about ``budget`` bytes),
        keys and nonces assigned now. They keep views of the buffers, which are never
        written to."""
        jobs: list[OpenRecords] = []
        while True:
            self._advance()
            buf = self._buf
            runs = scan_data_records(buf, self._pos, budget)
            if not runs:
                return jobs
            with memoryview(buf) as view:
                for start, end, count in runs:
                    keys = take_nonces(self._receive, self._received, count, self._interval)
                    self._received += count
                    job = OpenRecords(keys, view[start:end], count)
                    budget -= job.out_size
                    jobs.append(job)
            self._pos = runs[-1][1]
            if budget <= 0 or self._next is None or self._pos != len(buf):
                return jobs

    def next_control(self) -> tuple[int, bytes] | None:
        """Open the next complete record (of any type) inline, or ``None`` if it has not
        all come.

        For the records :meth:`open_jobs` leaves (close, unknown types), and the
        small-read path that opens a few buffered records without jobs. Raises
        :class:`FormatError` for a length shorter than a tag and
        :class:`AuthenticationError` for a record that does not verify.
        """
        self._advance()
        buf, pos = self._buf, self._pos
        if len(buf) - pos < HEADER_LEN:
            return None
        length = (buf[pos] << 8) | buf[pos + 1]
        if length < TAGLEN:
            raise FormatError(
                f"record length {length} is shorter than the {TAGLEN}-byte tag: the peer "
                "is not an EncryptedStream or the stream is corrupt"
            )
        end = pos + HEADER_LEN + length
        if len(buf) < end:
            return None
        header = bytes(buf[pos : pos + HEADER_LEN])
        plaintext = self._open(header, buf, pos + HEADER_LEN, end)
        self._pos = end
        return header[2], plaintext

    def open_whole(self, chunk: bytes) -> bytes | None:
        """With nothing buffered, open ``chunk`` if it is exactly one complete data record,
        straight from ``chunk`` (no copy into the buffer): its plaintext. ``None`` (and
        nothing consumed) for anything else, which then goes to :meth:`receive_data`.

        The small-message path: one read, one record. Raises as :meth:`next_control`.
        """
        size = len(chunk)
        if (
            size < WIRE_OVERHEAD
            or chunk[2] != DATA
            or ((chunk[0] << 8) | chunk[1]) + HEADER_LEN != size
            or len(self._buf) != self._pos
            or self._next is not None
        ):
            return None
        return self._open(chunk[:HEADER_LEN], chunk, HEADER_LEN, size)

    def _open(self, header: bytes, buf: Buffer, start: int, end: int) -> bytes:
        """Open the record body ``buf[start:end]`` under the next receive nonce."""
        with memoryview(buf) as view, view[start:end] as body:
            plaintext = self._receive.decrypt(header, body)
        self._received += 1
        if self._interval is not None and self._received % self._interval == 0:
            self._receive.rekey()
        return plaintext
