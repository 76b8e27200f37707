"""Every decoder and key parser, each a few lines over the shared harness (fuzz/_harness.py).

A streaming decoder's ``decode`` feeds the pieces to a fresh transform; a whole-input
parser joins them. Keys are fixed (fuzz/_keys.py) so the peers can decide the same
inputs; the password-KDF caps are lowered there (see MAX_WORK_FACTOR).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

import anyio

import streamcrypt
from streamcrypt.cli._keyfiles import KeyFileError, load_key_file
from streamcrypt.codecs import (
    age,
    armor,
    cobblestone,
    container,
    ece,
    ecies,
    envelope,
    noise,
    secretstream,
    tink,
    tink_keyset,
)
from streamcrypt.codecs.age._header import _encode_stanza
from streamcrypt.codecs.age._plugin import PluginClient, PluginServer, PluginUI
from streamcrypt.keys import KeyRing

from . import _keys as K
from . import _peers as peers
from ._harness import Target

__all__ = ["TARGETS", "incomplete_age_header", "noise_handshake", "noise_side"]


class Transform(Protocol):
    def update(self, data: bytes) -> bytes: ...
    def finalize(self) -> bytes: ...


def _stream(make: Callable[[], Transform]) -> Callable[[Sequence[bytes]], bytes]:
    def decode(pieces: Sequence[bytes]) -> bytes:
        dec = make()
        out = [dec.update(piece) for piece in pieces]
        return b"".join(out) + dec.finalize()

    return decode


def _whole(parse: Callable[[bytes], object]) -> Callable[[Sequence[bytes]], bytes]:
    def decode(pieces: Sequence[bytes]) -> bytes:
        parse(b"".join(pieces))
        return b""

    return decode


def _age() -> age.AgeDecryptor:
    return age.AgeDecryptor(
        identities=K.AGE_IDENTITIES, passphrase=K.PASSPHRASE, max_work_factor=K.MAX_WORK_FACTOR
    )


def _age_any(pieces: Sequence[bytes]) -> bytes:
    """Whole: ``decrypt_bytes``; in pieces: the async ``streamcrypt.decrypt(format="age")`` (armor found
    by itself in both), as a network peer would feed it."""
    identities = K.AGE_IDENTITIES
    if len(pieces) == 1:
        return streamcrypt.decrypt_bytes(
            pieces[0],
            format="age",
            identities=identities,
            passphrase=K.PASSPHRASE,
            max_work_factor=K.MAX_WORK_FACTOR,
            policy=None,
        )

    async def source() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    async def run() -> bytes:
        stream = streamcrypt.decrypt(
            source(),
            format="age",
            identities=identities,
            passphrase=K.PASSPHRASE,
            max_work_factor=K.MAX_WORK_FACTOR,
            policy=None,
        )
        return b"".join([chunk async for chunk in stream])

    return anyio.run(run)


def _ecies(data: bytes) -> bytes:
    curve, cipher, nonce, ce, ch = (
        K.ECIES_CONFIGS[data[0] % len(K.ECIES_CONFIGS)] if data else K.ECIES_CONFIGS[0]
    )
    return ecies.decrypt(
        K.ECIES_PRIVATE[curve],
        data[1:],
        curve=curve,
        cipher=cipher,
        nonce_length=nonce,
        compress_ephemeral=ce,
        compress_hkdf=ch,
    )


def noise_handshake(name: str, initiator: bool) -> noise.NoiseHandshake:
    """A fresh side of ``name`` with the fixed keys (its pattern says which it uses)."""
    pattern = noise.NoiseProtocolName.parse(name).pattern
    s = K.NOISE_STATIC_I if initiator else K.NOISE_STATIC_R
    remote = K.NOISE_STATIC_R if initiator else K.NOISE_STATIC_I
    return noise.NoiseHandshake(
        name,
        initiator,
        s=s if pattern.uses_local_static(initiator) else None,
        rs=noise.public_key(remote) if pattern.remote_static_premessage(initiator) else None,
        psks=[K.NOISE_PSK] * pattern.psk_count,
        e=K.NOISE_EPHEMERAL_I if initiator else K.NOISE_EPHEMERAL_R,
    )


def noise_side(scenario: int) -> noise.NoiseHandshake:
    """The side that reads the fuzzed message, in the state the scenario names."""
    name, role, written = K.NOISE_SCENARIOS[scenario]
    side = noise_handshake(name, initiator=role == "initiator")
    for _ in range(written):
        side.write_message(b"")
    return side


def _noise(data: bytes) -> bytes:
    if not data:
        return noise_side(0).read_message(b"")
    return noise_side(data[0] % len(K.NOISE_SCENARIOS)).read_message(data[1:])


#: The answers a fuzzed plugin gets: every request answered (so every path runs).
_PLUGIN_UI = PluginUI(
    message=lambda text: None,
    request_secret=lambda prompt: "1234",
    request_public=lambda prompt: "public",
    confirm=lambda prompt, yes, no: no is None,
)


def _plugin_client(machine: str) -> Callable[[Sequence[bytes]], bytes]:
    """A client of ``machine`` fed a plugin's output: its answers, then what it got."""

    def decode(pieces: Sequence[bytes]) -> bytes:
        if machine == "recipient-v1":
            client = PluginClient.wrap("fuzz", K.PLUGIN_RECIPIENT, bytes(16), ui=_PLUGIN_UI)
        else:
            stanzas = [age.Stanza(("X25519", "x"), bytes(32))]
            client = PluginClient.unwrap("fuzz", K.PLUGIN_IDENTITY, stanzas, ui=_PLUGIN_UI)
        out = bytearray(client.data_to_send())
        for piece in pieces:
            if piece:  # b"" is the end of the plugin's output, given once below
                client.receive_data(piece)
                out += client.data_to_send()
        client.receive_data(b"")
        out += b"".join(_encode_stanza(s) for s in client.stanzas)
        out += b" ".join(sorted(label.encode() for label in client.labels))
        return bytes(out) + (client.file_key or b"")

    return decode


def _plugin_server(pieces: Sequence[bytes]) -> bytes:
    """The plugin's side fed a client's phase 1 (the first byte picks the state machine):
    the request it read."""
    data = b"".join(pieces)
    machine = "identity-v1" if data[:1] < b"\x80" else "recipient-v1"
    server = PluginServer(machine)  # type: ignore[arg-type]
    skip = 1
    for piece in pieces:
        piece, skip = piece[skip:], max(0, skip - len(piece))
        if piece:
            server.receive_data(piece)
    event = server.next_event()
    if isinstance(event, age.WrapRequest):
        parts = [*event.recipients, *event.identities, *(k.hex() for k in event.file_keys)]
        return "\n".join([*parts, str(event.labels)]).encode()
    if isinstance(event, age.UnwrapRequest):
        files = [b"".join(_encode_stanza(s) for s in f) for f in event.files]
        return "\n".join(event.identities).encode() + b"\x00".join(files)
    return b""


def _stress_plugin() -> list[bytes]:
    """A plugin's output near the session cap: long messages, each answered."""
    message = _encode_stanza(age.Stanza(("msg",), bytes(48 << 10)))
    return [message * 15 + b"-> done\n\n"]


_KEYFILE_DIR = tempfile.mkdtemp(
    prefix="streamcrypt-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
)


def _keyfile(data: bytes) -> object:
    path = os.path.join(_KEYFILE_DIR, "key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # as keygen writes it
    with open(fd, "wb") as f:
        f.write(data)
    return load_key_file(path)


# ------------------------------------------------------------------- linearity stress
#
# Large inputs for the linearity probe: long headers (the part parsed before anything is
# released) and long valid streams.


def incomplete_age_header(size: int) -> bytes:
    """An incomplete age header of about ``size`` bytes: unknown stanzas, no MAC line."""
    stanza = b"-> unknown-type arg\n" + b"A" * 64 + b"\n" + b"A" * 20 + b"\n"
    return b"age-encryption.org/v1\n" + stanza * (size // len(stanza))


def _seal(make: Callable[[], Transform]) -> Callable[[bytes], bytes]:
    def encrypt(plaintext: bytes) -> bytes:
        enc = make()
        return enc.update(plaintext) + enc.finalize()

    return encrypt


def _big(plaintext_size: int, encrypt: Callable[[bytes], bytes]) -> Callable[[], list[bytes]]:
    return lambda: [encrypt(bytes(plaintext_size))]


def _envelope_header() -> list[bytes]:
    """An envelope header near its 64 KiB cap: one unknown stanza, no MAC yet."""
    size = envelope.MAX_HEADER_SIZE - 100
    stanza = bytes([0x7F]) + size.to_bytes(2, "big") + bytes(size)  # type 0x7f, length, body
    return [envelope.MAGIC + bytes([envelope.VERSION, 0, 1]) + stanza]


def _stress_age() -> list[bytes]:
    return [incomplete_age_header(256 << 10)]


def _stress_age_armored() -> list[bytes]:
    return [armor.armor(incomplete_age_header(192 << 10))]


def _ring(insecure: bool) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        if insecure:
            return KeyRing.from_json(data, insecure_plaintext=True)
        return KeyRing.from_json(
            data, K.PASSPHRASE, max_params=K.MAX_ARGON2, max_scrypt=K.MAX_SCRYPT
        )

    return parse


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "container",
            _stream(lambda: container.StreamDecryptor(K.RING, aad=K.AAD)),
            stress=_big(
                1 << 20,
                _seal(lambda: container.StreamEncryptor(K.RING, aad=K.AAD, segment_size=1 << 20)),
            ),
        ),
        *(
            [
                Target(
                    "container-pkcs11",
                    _stream(lambda: container.StreamDecryptor(K.token_ring(), aad=K.AAD)),
                )
            ]
            if K.token_available()
            else []
        ),
        Target(
            "envelope",
            _stream(
                lambda: envelope.EnvelopeDecryptor(
                    identities=[K.ENVELOPE_X25519],
                    passphrase=K.PASSPHRASE,
                    aad=K.AAD,
                    max_work_factor=K.MAX_ARGON2,
                    max_scrypt=K.MAX_SCRYPT,
                )
            ),
            stress=_envelope_header,
        ),
        Target("age", _stream(_age), peer=peers.age, stress=_stress_age),
        Target("age-armored", _age_any, peer=peers.age, stress=_stress_age_armored),
        Target(
            "tink-stream",
            _stream(lambda: tink.TinkStreamDecryptor(K.TINK_KEYSET, aad=K.AAD)),
            peer=peers.tink_stream,
            stress=_big(
                1 << 20,
                lambda p: streamcrypt.encrypt_bytes(
                    p, K.TINK_KEYSET.keys[3], aad=K.AAD, format="tink"
                ),
            ),
        ),
        Target(
            "tink-keyset-json",
            _whole(tink_keyset.keyset_from_json),
            chunked=False,
            peer=peers.tink_keyset_json,
        ),
        Target(
            "tink-keyset-binary",
            _whole(tink_keyset.keyset_from_binary),
            chunked=False,
            peer=peers.tink_keyset_binary,
        ),
        Target(
            "cobblestone",
            _stream(lambda: cobblestone.CobblestoneDecryptor(K.KEY, aad=K.AAD)),
            peer=peers.cobblestone,
            stress=_big(
                1 << 20,
                lambda p: streamcrypt.encrypt_bytes(p, K.KEY, aad=K.AAD, format="cobblestone"),
            ),
        ),
        Target(
            "ece",
            _stream(lambda: ece.EceDecryptor(K.KEY16)),
            peer=peers.ece,
            stress=_big(
                1 << 20,
                lambda p: streamcrypt.encrypt_bytes(
                    p, K.KEY16, segment_size=(2 << 20) - ece.OVERHEAD, format="ece"
                ),
            ),
        ),
        Target(
            "secretstream",
            _stream(
                lambda: secretstream.SecretStreamDecryptor(K.KEY, segment_size=K.SECRETSTREAM_CHUNK)
            ),
            peer=peers.secretstream,
            stress=_big(
                256 << 10,
                _seal(
                    lambda: secretstream.SecretStreamEncryptor(
                        K.KEY, segment_size=K.SECRETSTREAM_CHUNK
                    )
                ),
            ),
        ),
        Target("noise", _whole(_noise), chunked=False, peer=peers.noise),
        Target("ecies", _whole(_ecies), chunked=False, peer=peers.ecies),
        Target("keyring", _whole(_ring(False)), chunked=False),
        Target("keyring-clear", _whole(_ring(True)), chunked=False),
        Target("cli-keyfile", _whole(_keyfile), chunked=False, typed=(KeyFileError,)),
        Target("armor", _stream(armor.ArmorDecoder), stress=_big(1 << 20, armor.armor)),
        Target("age-plugin-identity", _plugin_client("identity-v1"), stress=_stress_plugin),
        Target("age-plugin-recipient", _plugin_client("recipient-v1")),
        Target("age-plugin-server", _plugin_server),
    )
}
