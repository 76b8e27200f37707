"""Noise interop with the ``noiseprotocol`` package over real loopback TCP.

One side is streamcrypt's sans-I/O :class:`NoiseHandshake`, the other noiseprotocol's
``NoiseConnection``; each is driven by the same small asyncio loop over a TCP connection
on 127.0.0.1 with an ephemeral port, every Noise message framed with a 2-byte big-endian
length. Both directions are run (streamcrypt initiator against a noiseprotocol server,
and a noiseprotocol initiator against a streamcrypt server), the handshake payloads and
handshake hashes are compared, then transport messages (empty, small, the 65535-byte
maximum, and after a rekey on both directions) are exchanged both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass, field

import pytest
from noise.connection import Keypair, NoiseConnection

from streamcrypt.codecs.noise import (
    MAX_MESSAGE_LEN,
    TAGLEN,
    CipherState,
    NoiseHandshake,
    generate_keypair,
)

TIMEOUT = 10.0  # seconds, for each whole connection; a loopback exchange takes milliseconds
PSK = bytes(range(32))
PROLOGUE = b"streamcrypt interop"


@dataclass
class Keys:
    init_priv: bytes
    init_pub: bytes
    resp_priv: bytes
    resp_pub: bytes


def _keys() -> Keys:
    ip, ipub = generate_keypair()
    rp, rpub = generate_keypair()
    return Keys(ip.secret_bytes(), ipub, rp.secret_bytes(), rpub)


def _pattern(name: str) -> str:
    return name.split("_")[1]


# -- the two implementations behind one small interface -------------------------------


@dataclass
class ScSide:
    """streamcrypt's NoiseHandshake, then its two CipherStates."""

    hs: NoiseHandshake
    send: CipherState | None = None
    recv: CipherState | None = None

    @classmethod
    def make(cls, name: str, initiator: bool, keys: Keys) -> ScSide:
        pattern = _pattern(name)
        s = rs = None
        if initiator:
            s = keys.init_priv if pattern[0] in "XIK" else None
            rs = keys.resp_pub if pattern[1] == "K" else None
        else:
            s = keys.resp_priv if pattern[1] in "XK" else None
            rs = keys.init_pub if pattern[0] == "K" else None
        psks = [PSK] if "psk" in pattern else []
        hs = NoiseHandshake(name, initiator, s=s, rs=rs, psks=psks, prologue=PROLOGUE)
        return cls(hs)

    @property
    def needs_write(self) -> bool:
        return self.hs.needs_write

    @property
    def complete(self) -> bool:
        return self.hs.complete

    def write(self, payload: bytes) -> bytes:
        return self.hs.write_message(payload)

    def read(self, message: bytes) -> bytes:
        payload = self.hs.read_message(message)
        if self.hs.complete:
            self.send, self.recv = self.hs.split()
        return payload

    def after_write(self) -> None:
        if self.hs.complete and self.send is None:
            self.send, self.recv = self.hs.split()

    def handshake_hash(self) -> bytes:
        return self.hs.handshake_hash

    def encrypt(self, data: bytes) -> bytes:
        assert self.send is not None
        return self.send.encrypt(b"", data)

    def decrypt(self, data: bytes) -> bytes:
        assert self.recv is not None
        return self.recv.decrypt(b"", data)

    def rekey_out(self) -> None:
        assert self.send is not None
        self.send.rekey()

    def rekey_in(self) -> None:
        assert self.recv is not None
        self.recv.rekey()


@dataclass
class NpSide:
    """noiseprotocol's NoiseConnection."""

    conn: NoiseConnection
    initiator: bool
    count: int = field(default=0)

    @classmethod
    def make(cls, name: str, initiator: bool, keys: Keys) -> NpSide:
        pattern = _pattern(name)
        conn = NoiseConnection.from_name(name.encode())
        conn.set_prologue(PROLOGUE)
        if initiator:
            conn.set_as_initiator()
            if pattern[0] in "XIK":
                conn.set_keypair_from_private_bytes(Keypair.STATIC, keys.init_priv)
            if pattern[1] == "K":
                conn.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, keys.resp_pub)
        else:
            conn.set_as_responder()
            if pattern[1] in "XK":
                conn.set_keypair_from_private_bytes(Keypair.STATIC, keys.resp_priv)
            if pattern[0] == "K":
                conn.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, keys.init_pub)
        if "psk" in pattern:
            conn.set_psks(psks=[PSK])
        conn.start_handshake()
        return cls(conn, initiator)

    @property
    def needs_write(self) -> bool:
        return not self.complete and (self.count % 2 == 0) == self.initiator

    @property
    def complete(self) -> bool:
        return bool(self.conn.handshake_finished)

    def write(self, payload: bytes) -> bytes:
        self.count += 1
        return bytes(self.conn.write_message(payload))

    def read(self, message: bytes) -> bytes:
        self.count += 1
        return bytes(self.conn.read_message(message))

    def after_write(self) -> None:
        pass

    def handshake_hash(self) -> bytes:
        return bytes(self.conn.get_handshake_hash())

    def encrypt(self, data: bytes) -> bytes:
        return bytes(self.conn.encrypt(data))

    def decrypt(self, data: bytes) -> bytes:
        return bytes(self.conn.decrypt(data))

    def rekey_out(self) -> None:
        self.conn.rekey_outbound_cipher()

    def rekey_in(self) -> None:
        self.conn.rekey_inbound_cipher()


Side = ScSide | NpSide


# -- one driver for both sides ------------------------------------------------------


async def _send(writer: asyncio.StreamWriter, message: bytes) -> None:
    assert len(message) <= MAX_MESSAGE_LEN
    writer.write(struct.pack(">H", len(message)) + message)
    await writer.drain()


async def _recv(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">H", await reader.readexactly(2))
    return await reader.readexactly(size)


def _payloads(tag: str) -> list[bytes]:
    """The transport payloads one side sends: empty, small, the largest, more small."""
    big = (tag.encode() * MAX_MESSAGE_LEN)[: MAX_MESSAGE_LEN - TAGLEN]
    return [b"", *(f"{tag} message {k}".encode() for k in range(5)), big, f"{tag} end".encode()]


@dataclass
class Transcript:
    handshake_payloads: list[bytes] = field(default_factory=list)
    handshake_hash: bytes = b""
    received: list[bytes] = field(default_factory=list)
    after_rekey: bytes = b""


async def _drive(
    side: Side, initiator: bool, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Transcript:
    """Handshake, then ping-pong transport messages, then one message each after a rekey."""
    out = Transcript()
    tag = "initiator" if initiator else "responder"
    n = 0
    while not side.complete:
        if side.needs_write:
            await _send(writer, side.write(f"{tag} handshake {n}".encode()))
            side.after_write()
        else:
            out.handshake_payloads.append(side.read(await _recv(reader)))
        n += 1
    out.handshake_hash = side.handshake_hash()
    for payload in _payloads(tag):
        if initiator:
            await _send(writer, side.encrypt(payload))
            out.received.append(side.decrypt(await _recv(reader)))
        else:
            out.received.append(side.decrypt(await _recv(reader)))
            await _send(writer, side.encrypt(payload))
    side.rekey_out()
    side.rekey_in()
    await _send(writer, side.encrypt(f"{tag} after rekey".encode()))
    out.after_rekey = side.decrypt(await _recv(reader))
    return out


async def _run_pair(
    server_obj: Side, client_obj: Side
) -> tuple[Transcript | BaseException, Transcript | BaseException]:
    """Serve one side on 127.0.0.1:0, connect the other (the initiator), drive both.

    Returns (client outcome, server outcome): a transcript, or the exception that side
    raised, so a test can check which side failed and how.
    """
    done: asyncio.Future[Transcript] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            done.set_result(await _drive(server_obj, False, reader, writer))
        except Exception as exc:  # handed to the test through the future
            done.set_exception(exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def connect(port: int) -> Transcript:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await _drive(client_obj, True, reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server, asyncio.timeout(TIMEOUT):
        port = server.sockets[0].getsockname()[1]
        client, served = await asyncio.gather(connect(port), done, return_exceptions=True)
    return client, served


PROTOCOLS = [
    f"Noise_{pattern}_25519_{cipher}_{hash_name}"
    for pattern in ("XX", "IK", "NK", "NNpsk0")
    for cipher, hash_name in (("ChaChaPoly", "BLAKE2s"), ("AESGCM", "SHA256"))
] + [
    "Noise_XX_25519_AESGCM_SHA512",
    "Noise_IK_25519_ChaChaPoly_BLAKE2b",
    "Noise_NNpsk0_25519_AESGCM_BLAKE2b",
    "Noise_NK_25519_ChaChaPoly_SHA512",
    "Noise_KK_25519_AESGCM_BLAKE2s",
    "Noise_XN_25519_ChaChaPoly_SHA256",
]


@pytest.mark.asyncio
@pytest.mark.parametrize("streamcrypt_role", ["initiator", "responder"])
@pytest.mark.parametrize("name", PROTOCOLS)
async def test_interop_over_loopback_tcp(name: str, streamcrypt_role: str) -> None:
    keys = _keys()
    sc_initiates = streamcrypt_role == "initiator"
    sc = ScSide.make(name, sc_initiates, keys)
    np = NpSide.make(name, not sc_initiates, keys)
    # The responder serves, the initiator connects.
    client, served = await _run_pair(np, sc) if sc_initiates else await _run_pair(sc, np)
    for outcome in (client, served):
        if isinstance(outcome, BaseException):
            raise outcome
    assert isinstance(client, Transcript) and isinstance(served, Transcript)
    sc_t, np_t = (client, served) if sc_initiates else (served, client)

    initiator_t, responder_t = (sc_t, np_t) if sc_initiates else (np_t, sc_t)
    n_messages = len(initiator_t.handshake_payloads) + len(responder_t.handshake_payloads)
    assert n_messages >= 1
    # Each side got the other's handshake payloads in order.
    assert responder_t.handshake_payloads == [
        f"initiator handshake {n}".encode() for n in range(0, n_messages, 2)
    ]
    assert initiator_t.handshake_payloads == [
        f"responder handshake {n}".encode() for n in range(1, n_messages, 2)
    ]
    assert sc_t.handshake_hash == np_t.handshake_hash
    assert len(sc_t.handshake_hash) == (64 if name.endswith(("SHA512", "BLAKE2b")) else 32)
    assert initiator_t.received == _payloads("responder")
    assert responder_t.received == _payloads("initiator")
    assert initiator_t.after_rekey == b"responder after rekey"
    assert responder_t.after_rekey == b"initiator after rekey"
    # streamcrypt learned the peer's static key where the pattern transmits or pre-shares it.
    pattern = _pattern(name)
    if sc_initiates and pattern[1] in "XK":
        assert sc.hs.remote_static == keys.resp_pub
    if not sc_initiates and pattern[0] in "XIK":
        assert sc.hs.remote_static == keys.init_pub


@pytest.mark.asyncio
async def test_interop_detects_wrong_server_key() -> None:
    """An IK initiator with the wrong server key fails the handshake on the server side."""
    from streamcrypt.errors import HandshakeError

    name = "Noise_IK_25519_ChaChaPoly_BLAKE2s"
    keys = _keys()
    _, wrong_pub = generate_keypair()
    wrong = Keys(keys.init_priv, keys.init_pub, keys.resp_priv, wrong_pub)
    np = NpSide.make(name, True, wrong)
    sc = ScSide.make(name, False, keys)

    client, served = await _run_pair(sc, np)
    assert isinstance(served, HandshakeError)
    assert sc.hs.state.value == "broken"
    # the server closed the connection: the client sees the stream end mid-frame
    assert isinstance(client, asyncio.IncompleteReadError)
