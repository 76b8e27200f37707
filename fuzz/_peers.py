"""The peers' verdicts for the differential mode, and the deliberate differences.

Each function answers "does the peer accept this input?" with the same keys the target
uses (fuzz/_keys.py). A peer refusing is any exception it raises. :data:`DIFFERENCES`
lists the disagreements that are deliberate (or the peer's limitation); each has an id
that docs/FUZZING.md's table lists too (tests/test_fuzz.py checks the two agree).
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import _keys as K

__all__ = ["DIFFERENCES", "Difference", "deliberate", "eciespy_config"]


def _accepts(run: Callable[[], object]) -> bool:
    try:
        with warnings.catch_warnings():  # noiseprotocol warns about fixed ephemerals
            warnings.simplefilter("ignore")
            run()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # pyo3 panics derive from BaseException
        return False
    return True


# ----------------------------------------------------------------------------- the peers


@cache
def _pyrage() -> tuple[Any, Any]:
    import pyrage

    return pyrage, pyrage.x25519.Identity.from_str(K.AGE_X25519.to_string())


def age(data: bytes) -> bool:
    """pyrage: the X25519 identity, or the passphrase when the header has an scrypt stanza."""
    pyrage, identity = _pyrage()
    if b"\n-> scrypt " in data[:4096] or _armored_scrypt(data):
        return _accepts(lambda: pyrage.passphrase.decrypt(data, K.PASSPHRASE))
    return _accepts(lambda: pyrage.decrypt(data, [identity]))


def _armored_scrypt(data: bytes) -> bool:
    from streamcrypt.codecs import armor

    if b"-----BEGIN AGE" not in data[:200]:
        return False
    try:
        return b"\n-> scrypt " in armor.dearmor(data)[:4096]
    except Exception:
        return False


@cache
def _tink_handle() -> Any:
    import tink
    from tink import cleartext_keyset_handle, streaming_aead

    streaming_aead.register()
    reader = tink.JsonKeysetReader(K.TINK_KEYSET.to_json())
    return cleartext_keyset_handle.read(reader).primitive(streaming_aead.StreamingAead)


def tink_stream(data: bytes) -> bool:
    primitive = _tink_handle()

    def run() -> None:
        with primitive.new_decrypting_stream(io.BytesIO(data), K.AAD) as stream:
            stream.read()

    return _accepts(run)


def _tink_keyset(reader: Callable[[], Any]) -> bool:
    from tink import cleartext_keyset_handle, streaming_aead

    streaming_aead.register()
    return _accepts(
        lambda: cleartext_keyset_handle.read(reader()).primitive(streaming_aead.StreamingAead)
    )


def tink_keyset_json(data: bytes) -> bool:
    import tink

    return _tink_keyset(lambda: tink.JsonKeysetReader(data.decode("utf-8")))


def tink_keyset_binary(data: bytes) -> bool:
    import tink

    return _tink_keyset(lambda: tink.BinaryKeysetReader(data))


def cobblestone(data: bytes) -> bool:
    from cryptography.cobblestone import Cobblestone256Decryptor

    def run() -> None:
        dec = Cobblestone256Decryptor(K.KEY, K.AAD)
        dec.update(data)
        dec.finalize()

    return _accepts(run)


def ece(data: bytes) -> bool:
    import http_ece

    return _accepts(lambda: http_ece.decrypt(data, key=K.KEY16, version="aes128gcm"))


def secretstream(data: bytes) -> bool:
    """PyNaCl's bindings: header, then messages of chunk + 17 bytes, the last one FINAL."""
    from nacl import bindings as b

    def run() -> None:
        state = b.crypto_secretstream_xchacha20poly1305_state()
        b.crypto_secretstream_xchacha20poly1305_init_pull(state, data[:24], K.KEY)
        pos, final = 24, False
        while pos < len(data):
            if final:
                raise ValueError("data after the FINAL message")
            piece = data[pos : pos + K.SECRETSTREAM_CHUNK + 17]
            pos += len(piece)
            _, tag = b.crypto_secretstream_xchacha20poly1305_pull(state, piece)
            final = tag == b.crypto_secretstream_xchacha20poly1305_TAG_FINAL
        if not final:
            raise ValueError("no FINAL message")

    return _accepts(run)


def eciespy_config(index: int) -> Any:
    """eciespy's ``Config`` for the target's configuration ``index``."""
    from ecies.config import Config

    curve, cipher, nonce, ce, ch = K.ECIES_CONFIGS[index % len(K.ECIES_CONFIGS)]
    return Config(
        elliptic_curve=curve,
        is_ephemeral_key_compressed=ce,
        is_hkdf_key_compressed=ch,
        symmetric_algorithm=cipher,
        symmetric_nonce_length=nonce,
    )


def ecies(data: bytes) -> bool:
    import ecies as eciespy

    if not data:
        return False
    config = eciespy_config(data[0])
    private = K.ECIES_PRIVATE[config.elliptic_curve]
    return _accepts(lambda: eciespy.decrypt(private, data[1:], config))


def noise(data: bytes) -> bool:
    """noiseprotocol's NoiseConnection, in the scenario's state, reads the message."""
    from noise.connection import Keypair, NoiseConnection

    scenario = data[0] % len(K.NOISE_SCENARIOS) if data else 0
    name, role, written = K.NOISE_SCENARIOS[scenario]
    initiator = role == "initiator"
    pattern = name.split("_")[1]

    def run() -> None:
        conn = NoiseConnection.from_name(name.encode())
        if initiator:
            conn.set_as_initiator()
            conn.set_keypair_from_private_bytes(Keypair.EPHEMERAL, K.NOISE_EPHEMERAL_I)
            if pattern[0] in "XIK":
                conn.set_keypair_from_private_bytes(Keypair.STATIC, K.NOISE_STATIC_I)
        else:
            conn.set_as_responder()
            conn.set_keypair_from_private_bytes(Keypair.EPHEMERAL, K.NOISE_EPHEMERAL_R)
            if pattern[1] in "XK":
                conn.set_keypair_from_private_bytes(Keypair.STATIC, K.NOISE_STATIC_R)
        if "psk" in pattern:
            conn.set_psks(psks=[K.NOISE_PSK])
        conn.start_handshake()
        for _ in range(written):
            conn.write_message(b"")
        conn.read_message(data[1:])

    return _accepts(run)


# --------------------------------------------------------------- deliberate differences


@dataclass(frozen=True)
class Difference:
    """A disagreement that is meant (or the peer's limitation), recognised by ``applies``."""

    id: str
    target: str
    we_accept: bool
    why: str
    applies: Callable[[bytes], bool]


def _age_header(data: bytes) -> bytes:
    from streamcrypt.codecs import armor

    if b"-----BEGIN" in data[:100]:
        try:
            data = armor.dearmor(data)
        except Exception:
            return b""
    return data.split(b"\n---", 1)[0]


def _scrypt_over_cap(data: bytes) -> bool:
    found = re.search(rb"\n-> scrypt \S+ ([0-9]+)\n", _age_header(data))
    return found is not None and (len(found[1]) > 2 or int(found[1]) > K.MAX_WORK_FACTOR)


def _ece_no_records(data: bytes) -> bool:
    return len(data) >= 21 and len(data) == 21 + data[20]


def _ece_short_keyid(data: bytes) -> bool:
    return len(data) >= 21 and len(data) < 21 + data[20]


def _ece_record_size_over_cap(data: bytes) -> bool:
    from streamcrypt.codecs import ece

    return len(data) >= 20 and int.from_bytes(data[16:20], "big") > ece.DEFAULT_MAX_RECORD_SIZE


def _ece_keyid_not_utf8(data: bytes) -> bool:
    try:
        data[21 : 21 + data[20]].decode("utf-8")
    except (UnicodeDecodeError, IndexError):
        return True
    return False


def _tink_keyset_without_enabled_key(parse: Callable[[Any], Any]) -> Callable[[bytes], bool]:
    """A keyset tink's own protobuf parser reads, in which no key is ENABLED."""

    def applies(data: bytes) -> bool:
        from tink.proto import tink_pb2

        try:
            keyset = parse(data)
        except Exception:
            return False
        return not any(key.status == tink_pb2.ENABLED for key in keyset.key)

    return applies


def _tink_binary(data: bytes) -> Any:
    import tink

    return tink.BinaryKeysetReader(data).read()


def _tink_json(data: bytes) -> Any:
    import tink

    return tink.JsonKeysetReader(data.decode("utf-8")).read()


_NO_ENABLED_KEY = (
    "a keyset with no ENABLED key, which tink reads when all its key material is "
    "ASYMMETRIC_PUBLIC (it then decrypts nothing); we refuse it as no key to use "
    "(codecs/tink_keyset.py)"
)

DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "tink-keyset-no-enabled-key",
        "tink-keyset-binary",
        False,
        _NO_ENABLED_KEY,
        _tink_keyset_without_enabled_key(_tink_binary),
    ),
    Difference(
        "tink-keyset-no-enabled-key",
        "tink-keyset-json",
        False,
        _NO_ENABLED_KEY,
        _tink_keyset_without_enabled_key(_tink_json),
    ),
    Difference(
        "ece-no-records",
        "ece",
        False,
        "a header with no record at all: http_ece writes it for an empty body; it cannot "
        "be told from a body whose records were all cut off, so we refuse it unless "
        "allow_no_records=True (codecs/ece.py)",
        _ece_no_records,
    ),
    Difference(
        "ece-short-keyid",
        "ece",
        False,
        "the header's key id runs past the end of the body: http_ece takes the short key "
        "id and an empty body; we report a truncated header",
        _ece_short_keyid,
    ),
    Difference(
        "ece-record-size-cap",
        "ece",
        False,
        "a record size above the decoder's max_record_size (16 MiB by default) is refused "
        "before any record is buffered (LimitExceededError); http_ece takes any size",
        _ece_record_size_over_cap,
    ),
    Difference(
        "ece-keyid-octets",
        "ece",
        True,
        "RFC 8188 makes the key id an octet string; http_ece decodes it as UTF-8 and fails "
        "on other octets (we use it as bytes)",
        _ece_keyid_not_utf8,
    ),
    Difference(
        "age-pq-identity",
        "age",
        True,
        "pyrage 1.4 has no ML-KEM-768+X25519 identity: files only the post-quantum "
        "identity opens are ours alone",
        lambda data: b"\n-> mlkem768x25519 " in _age_header(data),
    ),
    Difference(
        "age-scrypt-cap",
        "age",
        False,
        "the targets read scrypt work factors up to 12 (a lowered cap, fuzz/_keys.py); "
        "rage's own cap is higher",
        _scrypt_over_cap,
    ),
)


def deliberate(target: str, data: bytes, we_accept: bool) -> Difference | None:
    """The listed difference that explains a disagreement on ``data``, if any."""
    family = target.removesuffix("-armored")
    for diff in DIFFERENCES:
        if diff.target == family and diff.we_accept == we_accept and diff.applies(data):
            return diff
    return None
