"""Seed corpora: valid inputs for every target, made by the library and by the peers.

``python -m fuzz seeds`` writes them to fuzz/corpus/<target>/ (committed, so the smoke
test is deterministic; salts and nonces are random, so a rewrite changes the files).
Plaintexts are short and segments small, so a mutation lands near a boundary often.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import streamcrypt
from streamcrypt.codecs import (
    age,
    armor,
    container,
    ece,
    envelope,
    secretstream,
)
from streamcrypt.codecs import ecies as sc_ecies
from streamcrypt.keys import Argon2Params, ScryptParams
from streamcrypt.primitives import Ed25519PrivateKey

from . import _keys as K
from ._peers import eciespy_config
from .targets import Transform

__all__ = ["DICTIONARY", "make_seeds"]

PLAINTEXTS = [b"", b"x", bytes(range(256)) * 2 + b"tail", b"fuzz " * 700]

#: Tokens the mutator splices in, per target (libFuzzer gets them as -dict).
DICTIONARY: dict[str, list[bytes]] = {
    "age": [
        b"age-encryption.org/v1\n",
        b"-> X25519 ",
        b"-> scrypt ",
        b"-> mlkem768x25519 ",
        b"\n--- ",
        b" 22\n",
        b"AAAA",
    ],
    "tink-keyset-json": [
        b'"primaryKeyId"',
        b'"key"',
        b'"keyData"',
        b'"typeUrl"',
        b'"value"',
        b'"keyMaterialType"',
        b'"status"',
        b'"keyId"',
        b'"outputPrefixType"',
        b'"ENABLED"',
        b'"RAW"',
        b"4294967297",
        b"2147483648",
        b"9223372036854775808",
        b"-9223372036854775808",
        b"1e400",
        b"Infinity",
        b"null",
        b"[]",
    ],
    "keyring": [b'"kdf"', b'"alg"', b'"scrypt"', b'"argon2id"', b'"id"', b"\\ud800", b"[]"],
    "cli-keyfile": [b"streamcrypt-key: 1\n", b"type: ", b"key: ", b"AGE-SECRET-KEY-1", b"{"],
    "armor": [b"-----BEGIN AGE ENCRYPTED FILE-----", b"-----END AGE ENCRYPTED FILE-----", b"\r\n"],
}
DICTIONARY["age-plugin-identity"] = [
    b"-> ",
    b"\n\n",
    b"-> done\n\n",
    b"-> file-key 0\n",
    b"-> error ",
    b"-> msg\n",
    b"-> confirm ",
    b"-> request-secret\n",
    b"A" * 64 + b"\n",
]
DICTIONARY["age-plugin-recipient"] = [
    *DICTIONARY["age-plugin-identity"],
    b"-> recipient-stanza 0 ",
    b"-> labels ",
]
DICTIONARY["age-plugin-server"] = [
    b"-> add-identity ",
    b"-> add-recipient ",
    b"-> wrap-file-key\n",
    b"-> recipient-stanza 0 ",
    b"-> extension-labels\n\n",
    b"-> done\n\n",
]
DICTIONARY["age-armored"] = DICTIONARY["age"] + DICTIONARY["armor"]
DICTIONARY["keyring-clear"] = DICTIONARY["keyring"]


def _stream_seeds(encrypt: Callable[[bytes], bytes]) -> list[bytes]:
    return [encrypt(p) for p in PLAINTEXTS]


def _age() -> list[bytes]:
    import pyrage

    x, pq = K.AGE_X25519.recipient, K.AGE_PQ.recipient
    out = [
        streamcrypt.encrypt_bytes(p, recipients=[x], policy=None, format="age") for p in PLAINTEXTS
    ]
    out += [
        streamcrypt.encrypt_bytes(b"pq", recipients=[pq], format="age"),
        streamcrypt.encrypt_bytes(
            b"two", recipients=[x, age.X25519Identity(bytes(32)).recipient], format="age"
        ),
    ]
    out += [
        streamcrypt.encrypt_bytes(b"pass", passphrase=K.PASSPHRASE, work_factor=2, format="age")
    ]
    theirs = pyrage.x25519.Recipient.from_str(str(x))
    out += [pyrage.encrypt(p, [theirs]) for p in PLAINTEXTS[:3]]
    return out


def _age_armored() -> list[bytes]:
    import pyrage

    x = K.AGE_X25519.recipient
    out = [
        streamcrypt.encrypt_bytes(p, recipients=[x], armor=True, format="age")
        for p in PLAINTEXTS[:3]
    ]
    out += [
        streamcrypt.encrypt_bytes(
            b"pass", passphrase=K.PASSPHRASE, armor=True, work_factor=2, format="age"
        )
    ]
    theirs = pyrage.x25519.Recipient.from_str(str(x))
    out += [pyrage.encrypt(b"theirs", [theirs], armored=True)]
    return out


def _tink_stream() -> list[bytes]:
    import tink as tink_pkg
    from tink import cleartext_keyset_handle, streaming_aead

    out = [
        streamcrypt.encrypt_bytes(p, key, aad=K.AAD, format="tink")
        for key in K.TINK_KEYSET.keys
        for p in PLAINTEXTS
    ]
    streaming_aead.register()
    handle = cleartext_keyset_handle.read(tink_pkg.JsonKeysetReader(K.TINK_KEYSET.to_json()))
    primitive = handle.primitive(streaming_aead.StreamingAead)
    for p in PLAINTEXTS[:3]:
        sink = _Sink()
        with primitive.new_encrypting_stream(sink, K.AAD) as stream:
            stream.write(p)
        out.append(sink.data)
    return out


class _Sink(io.BytesIO):
    data = b""

    def close(self) -> None:
        self.data = self.getvalue()
        super().close()


def _tink_keysets(binary: bool) -> list[bytes]:
    import tink as tink_pkg
    from tink import secret_key_access, streaming_aead

    streaming_aead.register()
    token = secret_key_access.TOKEN
    templates = streaming_aead.streaming_aead_key_templates
    handles = [
        tink_pkg.new_keyset_handle(t)
        for t in (templates.AES128_GCM_HKDF_4KB, templates.AES256_CTR_HMAC_SHA256_1MB)
    ]
    handles.append(tink_pkg.json_proto_keyset_format.parse(K.TINK_KEYSET.to_json(), token))
    if binary:
        fmt = tink_pkg.proto_keyset_format
        return [bytes(fmt.serialize(h, secret_key_access.TOKEN)) for h in handles]
    fmt_json = tink_pkg.json_proto_keyset_format
    out = [fmt_json.serialize(h, token).encode() for h in handles]
    # enums as numbers (protobuf's JSON takes both), so mutations reach numbers outside int32
    numbers = {'"ENABLED"': "1", '"RAW"': "3", '"SYMMETRIC"': "1"}
    text = out[-1].decode()
    for name, number in numbers.items():
        text = text.replace(name, number)
    return [*out, text.encode()]


def _cobblestone() -> list[bytes]:
    from cryptography.cobblestone import Cobblestone256Encryptor

    out = _stream_seeds(
        lambda p: streamcrypt.encrypt_bytes(p, K.KEY, aad=K.AAD, format="cobblestone")
    )
    for p in PLAINTEXTS[:3]:
        enc = Cobblestone256Encryptor(K.KEY, K.AAD)
        out.append(enc.update(p) + enc.finalize())
    return out


def _ece() -> list[bytes]:
    import http_ece

    out = [
        streamcrypt.encrypt_bytes(
            p, K.KEY16, segment_size=64 - ece.OVERHEAD, keyid=b"k", format="ece"
        )
        for p in PLAINTEXTS
    ]
    out += [http_ece.encrypt(p, key=K.KEY16, rs=100) for p in PLAINTEXTS[:3]]
    return out


def _secretstream() -> list[bytes]:
    from nacl import bindings as b

    out = _stream_seeds(
        lambda p: _encrypt(
            secretstream.SecretStreamEncryptor(K.KEY, segment_size=K.SECRETSTREAM_CHUNK), p
        )
    )
    state = b.crypto_secretstream_xchacha20poly1305_state()
    theirs = [b.crypto_secretstream_xchacha20poly1305_init_push(state, K.KEY)]
    theirs.append(b.crypto_secretstream_xchacha20poly1305_push(state, b"m" * K.SECRETSTREAM_CHUNK))
    tag = b.crypto_secretstream_xchacha20poly1305_TAG_FINAL
    theirs.append(b.crypto_secretstream_xchacha20poly1305_push(state, b"end", tag=tag))
    return [*out, b"".join(theirs)]


def _stanzas(*stanzas: tuple[tuple[str, ...], bytes]) -> bytes:
    from streamcrypt.codecs.age._header import _encode_stanza

    return b"".join(_encode_stanza(age.Stanza(args, body)) for args, body in stanzas)


_B64_YES = base64.b64encode(b"yes").decode().rstrip("=")
#: A plugin's phase 2 as the clients see it: every request a plugin may make.
_PLUGIN_ASKS = (
    (("msg",), b"touch the token"),
    (("grease-cmd", "x"), b"\x00" * 80),
    (("confirm", _B64_YES), b"go on?"),
    (("request-secret",), b"PIN"),
    (("request-public",), b"name"),
)


def _plugin_identity() -> list[bytes]:
    done = (("done",), b"")
    return [
        _stanzas(*_PLUGIN_ASKS, (("file-key", "0"), bytes(16)), done),
        _stanzas((("error", "stanza", "0", "0"), b"bad stanza"), done),
        _stanzas(done),
    ]


def _plugin_recipient() -> list[bytes]:
    done = (("done",), b"")
    stanza = (("recipient-stanza", "0", "fuzz", "tag"), bytes(24))
    return [
        _stanzas(*_PLUGIN_ASKS, stanza, stanza, done),
        _stanzas((("labels", "postquantum", "x"), b""), stanza, done),
        _stanzas((("error", "recipient", "0"), b"not mine"), done),
    ]


def _plugin_server() -> list[bytes]:
    done = (("done",), b"")
    unwrap = _stanzas(
        (("add-identity", K.PLUGIN_IDENTITY), b""),
        (("recipient-stanza", "0", "X25519", "abc"), bytes(32)),
        (("grease", "-"), b"\xff" * 70),
        (("recipient-stanza", "1", "fuzz", "t"), bytes(24)),
        done,
    )
    wrap = _stanzas(
        (("add-recipient", K.PLUGIN_RECIPIENT), b""),
        (("add-identity", K.PLUGIN_IDENTITY), b""),
        (("wrap-file-key",), bytes(16)),
        (("extension-labels",), b""),
        done,
    )
    return [b"\x00" + unwrap, b"\xff" + wrap]


def _encrypt(enc: Transform, plaintext: bytes) -> bytes:
    return enc.update(plaintext) + enc.finalize()


def _noise() -> list[bytes]:
    """For each scenario, what the other side sends at that point (ours)."""
    from .targets import noise_handshake

    out = []
    for index, (name, role, written) in enumerate(K.NOISE_SCENARIOS):
        for payload in (b"", b"payload"):
            reader = noise_handshake(name, initiator=role == "initiator")
            writer = noise_handshake(name, initiator=role != "initiator")
            for _ in range(written):
                writer.read_message(reader.write_message(b""))
            out.append(bytes([index]) + writer.write_message(payload))
    return out


def _ecies() -> list[bytes]:
    import ecies as eciespy

    out: list[bytes] = []
    for index, (curve, cipher, nonce, ce, ch) in enumerate(K.ECIES_CONFIGS):
        public = sc_ecies.public_key(K.ECIES_PRIVATE[curve], curve=curve)
        out.extend(
            bytes([index])
            + sc_ecies.encrypt(
                public,
                p,
                curve=curve,
                cipher=cipher,
                nonce_length=nonce,
                compress_ephemeral=ce,
                compress_hkdf=ch,
            )
            for p in PLAINTEXTS[:3]
        )
        theirs = eciespy.encrypt(public, b"theirs", eciespy_config(index))
        out.append(bytes([index]) + theirs)
    return out


def _keyring(clear: bool) -> list[bytes]:
    if clear:
        return [K.RING.to_json(insecure_plaintext=True).encode()]
    return [
        K.RING.to_json(K.PASSPHRASE, params=Argon2Params(1, 8192)).encode(),
        K.RING.to_json(K.PASSPHRASE, params=ScryptParams(16, 1, 1)).encode(),
    ]


def _keyfiles() -> list[bytes]:
    from streamcrypt.cli._keyfiles import new_key_text

    texts = [new_key_text(kind, None)[0] for kind in ("symmetric", "ed25519", "x25519", "age")]
    texts.append(f"# an age identity\n{K.AGE_X25519.to_string()}\n{K.AGE_PQ.to_string()}\n")
    texts.append(K.TINK_KEYSET.to_json())
    return [t.encode() for t in texts]


def _envelope() -> list[bytes]:
    signer = Ed25519PrivateKey(bytes(range(32)))
    seg = container.MIN_SEGMENT_SIZE

    def to(**kw: object) -> Callable[[bytes], bytes]:
        def encrypt(plaintext: bytes) -> bytes:
            enc = envelope.EnvelopeEncryptor(aad=K.AAD, segment_size=seg, **kw)  # type: ignore[arg-type]
            return enc.update(plaintext) + enc.finalize()

        return encrypt

    out = _stream_seeds(to(recipients=[K.ENVELOPE_X25519.recipient]))
    out += [to(passphrase=K.PASSPHRASE, work_factor=Argon2Params(1, 8192))(b"argon2")]
    out += [to(passphrase=K.PASSPHRASE, work_factor=ScryptParams(16, 1, 1))(b"scrypt")]
    out += [to(recipients=[K.ENVELOPE_X25519.recipient], sign_with=signer)(b"signed")]
    return out


def make_seeds() -> dict[str, list[bytes]]:
    """Seed inputs for every target, by target name."""
    seg = container.MIN_SEGMENT_SIZE
    return {
        "container": _stream_seeds(
            lambda p: _encrypt(container.StreamEncryptor(K.RING, aad=K.AAD, segment_size=seg), p)
        ),
        "container-pkcs11": _stream_seeds(
            lambda p: _encrypt(
                container.StreamEncryptor(K.token_ring(), aad=K.AAD, segment_size=seg), p
            )
        )
        if K.token_available()
        else [],
        "envelope": _envelope(),
        "age": _age(),
        "age-armored": _age_armored(),
        "tink-stream": _tink_stream(),
        "tink-keyset-json": _tink_keysets(binary=False),
        "tink-keyset-binary": _tink_keysets(binary=True),
        "cobblestone": _cobblestone(),
        "ece": _ece(),
        "secretstream": _secretstream(),
        "noise": _noise(),
        "ecies": _ecies(),
        "keyring": _keyring(clear=False),
        "keyring-clear": _keyring(clear=True),
        "cli-keyfile": _keyfiles(),
        "age-plugin-identity": _plugin_identity(),
        "age-plugin-recipient": _plugin_recipient(),
        "age-plugin-server": _plugin_server(),
        "armor": [armor.armor(p) for p in PLAINTEXTS]
        + [armor.armor(bytes(100)).replace(b"\n", b"\r\n")],
    }
