"""Secrets stay secret: no Python arithmetic on them, and none in a repr, pickle or log.

- Secret-dependent arithmetic runs in constant-time native code: while an operation on a
  secret runs, no streamcrypt frame turns bytes into a Python integer (``int.from_bytes``,
  ``pow``) and none loops in Python (a ladder over the scalar's bits would).
- Every public type that takes a secret (found by one rule, below) keeps it out of its
  repr, str, log lines and error messages, and refuses (through ``HoldsSecrets``) to be
  pickled or copied, fresh or used.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import importlib
import inspect
import logging
import pickle
import pkgutil
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import streamcrypt
import streamcrypt.codecs
import streamcrypt.primitives
import streamcrypt.transports
from streamcrypt.codecs import ecies
from streamcrypt.errors import InvalidParameterError
from streamcrypt.keys import HoldsSecrets, KeyRing, Pkcs11Key, SecretKey
from streamcrypt.primitives import (
    EdDsaBlake2bPrivateKey,
    eddsa_to_x25519_private,
    elligator_key_pair,
    elligator_rev,
    x25519_dirty_fast,
    x25519_dirty_small,
    x25519_inverse,
)

ROOT = str(Path(streamcrypt.__file__).parent)
SECRET = bytes(range(7, 39))
CURVE_POINT = (9).to_bytes(32, "little")  # the base point
TWIST_POINT = (2).to_bytes(32, "little")  # 2^3 + A 2^2 + 2 is not a square: on the twist

SECP_PUBLIC = ecies.generate_keypair("secp256k1")[1]
SECP_EPHEMERAL = ecies.encapsulate(SECP_PUBLIC)[0]

#: Every operation on a secret scalar, key or seed of the curve code.
SECRET_OPERATIONS: dict[str, Callable[[], object]] = {
    "x25519_dirty_fast": lambda: x25519_dirty_fast(SECRET),
    "x25519_dirty_small": lambda: x25519_dirty_small(SECRET),
    "x25519_inverse (curve)": lambda: x25519_inverse(SECRET, CURVE_POINT),
    "x25519_inverse (twist)": lambda: x25519_inverse(SECRET, TWIST_POINT),
    "elligator_key_pair": lambda: elligator_key_pair(SECRET),
    "elligator_rev (of a secret's key)": lambda: elligator_rev(x25519_dirty_fast(SECRET), 1),
    "eddsa_to_x25519_private": lambda: eddsa_to_x25519_private(SECRET),
    "EdDsaBlake2bPrivateKey": lambda: EdDsaBlake2bPrivateKey(SECRET),
    "EdDsaBlake2bPrivateKey.sign": lambda: EdDsaBlake2bPrivateKey(SECRET).sign(b"message"),
    "EdDsaBlake2bPrivateKey.sign_chunks": lambda: EdDsaBlake2bPrivateKey(SECRET).sign_chunks(
        lambda: [b"mess", b"age"]
    ),
    "ecies secp256k1 key pair": lambda: ecies.generate_keypair("secp256k1"),
    "ecies secp256k1 encapsulate": lambda: ecies.encapsulate(SECP_PUBLIC),
    "ecies secp256k1 decapsulate": lambda: ecies.decapsulate(SECRET, SECP_EPHEMERAL),
    "ecies secp256k1 shared point": lambda: ecies.shared_point("secp256k1", SECRET, SECP_PUBLIC),
}

#: Builtins that make or compute with Python integers from bytes.
INTEGER_MAKERS = {"from_bytes", "pow"}
#: More Python lines than argument checks and a few native calls take: a loop.
LINE_BUDGET = 150


def _trace(operation: Callable[[], object]) -> tuple[list[str], int]:
    """(integer-making builtins called from streamcrypt frames, streamcrypt lines run)."""
    calls: list[str] = []
    lines = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and frame.f_code.co_filename.startswith(ROOT):
            if getattr(arg, "__name__", "") in INTEGER_MAKERS:
                calls.append(f"{arg.__name__} in {frame.f_code.co_qualname}")

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if not frame.f_code.co_filename.startswith(ROOT):
            return None
        if event == "line":
            lines += 1
        return trace

    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        operation()
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return calls, lines


@pytest.mark.parametrize("name", sorted(SECRET_OPERATIONS))
def test_secret_curve_arithmetic_runs_in_native_code(name: str) -> None:
    operation = SECRET_OPERATIONS[name]
    operation()  # warm up: imports and caches are not the operation
    calls, lines = _trace(operation)
    assert not calls, f"{name} turns a secret into a Python integer: {calls}"
    assert lines < LINE_BUDGET, f"{name} runs {lines} Python lines: a loop over secret data?"


# ------------------------------------------------------------ secrets out of sight
#
# Every public class that holds a secret is found by one rule: its constructor takes a
# parameter named for a secret (key, keys, keyring, ikm, seed, secret, psk, psks,
# password, passphrase, identities, or ``*_key`` / ``*_seed``, not ``public``), or it
# derives from HoldsSecrets, the library's one mechanism against secrets in pickles, or it
# is a codec's encryptor or decryptor. Each is built with marker secrets; its repr, str,
# log lines and the messages of the errors it raises must not contain them, and it must
# refuse every pickle protocol, copy.copy and copy.deepcopy, both fresh and after use (a
# check after use alone passed Blake3Tap, whose fresh state pickled the key: the hasher
# that refused is built at the first update).

#: Marker key bytes: every bytes secret below is a prefix of this.
MARK = hashlib.sha512(b"streamcrypt test_secrets marker").digest() * 2
#: Marker passwords and passphrases.
PASS = "marker-passphrase-5ec7a3f1"
#: Marker integer secret (a keyed chunker's seed).
SEED_INT = 0x5EC7A3F1

SECRET_PARAMETER = re.compile(
    r"(?:\w+_)?(?:key|keys|keyring|ikm|seed|secret|psks?|password|passphrase|identities)"
)


def _public_classes() -> dict[str, type]:
    found: dict[type, str] = {}
    modules = ["streamcrypt"] + [
        info.name for info in pkgutil.walk_packages(streamcrypt.__path__, "streamcrypt.")
    ]
    for module_name in modules:
        if any(part.startswith("_") for part in module_name.split(".")):
            continue
        with warnings.catch_warnings():  # a module kept under a former name warns
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if inspect.isclass(value) and value not in found:
                found[value] = f"{module_name}.{name}"
    return {name: cls for cls, name in found.items()}


def _takes_secret(cls: type) -> bool:
    """A type holds a secret if it derives from HoldsSecrets, takes a parameter named for a
    secret, or is a codec's encryptor or decryptor (a stream key and nonces, whatever its
    parameters are called: an encryptor to public recipients makes its own key)."""
    if issubclass(cls, HoldsSecrets):
        return cls is not HoldsSecrets
    if cls.__name__.endswith(("Encryptor", "Decryptor")):
        return True
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return any(
        SECRET_PARAMETER.fullmatch(p) and "public" not in p and "encrypted" not in p
        for p in parameters
    )


HOLDERS = {name: cls for name, cls in _public_classes().items() if _takes_secret(cls)}


def k(n: int = 32) -> bytes:
    return MARK[:n]


def _rclone_keys() -> Any:
    from streamcrypt.codecs.rclone import RcloneKeys

    return RcloneKeys(k(32), MARK[32:64], MARK[64:80])


def _tink_raw() -> Any:
    from streamcrypt.codecs.tink import AesGcmHkdfStreamingParams, TinkStreamingKey

    return TinkStreamingKey(SecretKey(k(32)), AesGcmHkdfStreamingParams(32, 4096))


def _backup_keys() -> Any:
    from streamcrypt.codecs.backup import BackupKeys

    return BackupKeys.derive(SecretKey(k(32)))


def _symmetric_state() -> Any:
    from streamcrypt.codecs import noise

    state = noise.SymmetricState(noise.NoiseProtocolName.parse("Noise_NN_25519_ChaChaPoly_BLAKE2s"))
    state.mix_key(k(32))
    return state


def _ring(n: int = 32) -> KeyRing:
    return KeyRing([SecretKey(k(n), key_id="marker")])


@functools.cache
def _rsa_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@functools.cache
def _token_key() -> object:
    """A key in the SoftHSM2 test token whose bytes are the marker (imported)."""
    from streamcrypt.testing import softhsm_token

    pytest.importorskip("pkcs11")
    try:
        hsm = softhsm_token()
    except RuntimeError as exc:  # SoftHSM2 is not installed (make peers)
        pytest.skip(str(exc))
    return Pkcs11Key.import_key(hsm.uri("secrets-marker"), k(32), pin=hsm.pin_source)


def _factories() -> dict[str, Callable[[], object]]:
    """Builders for the classes a key (and a nonce of some size) cannot build."""
    from streamcrypt.codecs import (
        age,
        aws,
        backup,
        cobblestone,
        container,
        ece,
        envelope,
        noise,
        rclone,
        records,
        secretstream,
        tink,
    )
    from streamcrypt.codecs.tink import AesCtrHmacStreamingParams, AesGcmHkdfStreamingParams

    rsa_key = _rsa_key()
    age_identity = age.X25519Identity(k(32))
    env_identity = envelope.X25519Identity(k(32))
    return {
        "streamcrypt.codecs.age.AgeCodec": lambda: age.AgeCodec(k(32)),
        "streamcrypt.codecs.age.MLKEM768X25519Identity": lambda: age.MLKEM768X25519Identity(k(32)),
        "streamcrypt.codecs.age.PluginIdentity": lambda: age.PluginIdentity(
            age.plugin_identity("x", k(32))
        ),
        "streamcrypt.codecs.age.WrapRequest": lambda: age.WrapRequest((), (), (k(16),)),
        "streamcrypt.codecs.age.UnwrapRequest": lambda: age.UnwrapRequest(
            (age.plugin_identity("x", k(32)),), ()
        ),
        "streamcrypt.codecs.age.ScryptIdentity": lambda: age.ScryptIdentity(PASS),
        "streamcrypt.codecs.age.ScryptRecipient": lambda: age.ScryptRecipient(PASS),
        "streamcrypt.codecs.age.SshEd25519Identity": lambda: age.SshEd25519Identity(k(32)),
        "streamcrypt.codecs.age.SshRsaIdentity": lambda: age.SshRsaIdentity(rsa_key),
        "streamcrypt.codecs.age.X25519Identity": lambda: age_identity,
        "streamcrypt.codecs.X25519Identity": lambda: age_identity,
        "streamcrypt.codecs.AgeDecryptor": lambda: age.AgeDecryptor(identities=[age_identity]),
        "streamcrypt.codecs.AgeEncryptor": lambda: age.AgeEncryptor(passphrase=PASS),
        "streamcrypt.codecs.aws.AwsFrameCodec": lambda: aws.AwsFrameCodec(k(32), bytes(32), 4096),
        "streamcrypt.codecs.aws.RawAesKeyring": lambda: aws.RawAesKeyring("ns", "name", k(32)),
        "streamcrypt.keys.Pkcs11Key": _token_key,
        "streamcrypt.codecs.aws.RawRsaKeyring": lambda: aws.RawRsaKeyring(
            "ns", "name", private_key=rsa_key
        ),
        "streamcrypt.codecs.AwsEncryptor": lambda: aws.AwsEncryptor(
            aws.RawAesKeyring("ns", "name", k(32))
        ),
        "streamcrypt.codecs.AwsDecryptor": lambda: aws.AwsDecryptor(
            aws.RawAesKeyring("ns", "name", k(32))
        ),
        "streamcrypt.codecs.aws.AwsBodyDecryptor": lambda: (
            aws.AwsDecryptor(aws.RawAesKeyring("ns", "name", k(32))).body
        ),
        "streamcrypt.codecs.backup.BackupKeys": _backup_keys,
        "streamcrypt.codecs.backup.DataKeys": lambda: backup.DataKeys.derive(k(32), bytes(16)),
        "streamcrypt.codecs.backup.PackWriter": lambda: backup.PackWriter(_backup_keys()),
        "streamcrypt.codecs.backup.PackOpener": lambda: backup.PackOpener(
            _backup_keys(), bytes(32), backup.PackWriter(_backup_keys()).finish()[:64]
        ),
        "streamcrypt.codecs.cobblestone.CobblestoneCodec": lambda: cobblestone.CobblestoneCodec(
            k(32), bytes(12)
        ),
        "streamcrypt.codecs.container.ContainerCodec": lambda: container.ContainerCodec(
            streamcrypt.primitives.AES256GCM, k(32), bytes(7), 4096
        ),
        "streamcrypt.codecs.ece.EceCodec": lambda: ece.EceCodec(k(16), bytes(16), 4096),
        "streamcrypt.codecs.EceEncryptor": lambda: ece.EceEncryptor(_ring(16)),
        "streamcrypt.codecs.EceDecryptor": lambda: ece.EceDecryptor(_ring(16)),
        "streamcrypt.codecs.envelope.EciesIdentity": lambda: envelope.EciesIdentity(k(32)),
        "streamcrypt.codecs.envelope.PassphraseIdentity": lambda: envelope.PassphraseIdentity(PASS),
        "streamcrypt.codecs.envelope.PassphraseRecipient": lambda: envelope.PassphraseRecipient(
            PASS
        ),
        "streamcrypt.codecs.envelope.X25519Identity": lambda: env_identity,
        "streamcrypt.codecs.EnvelopeEncryptor": lambda: envelope.EnvelopeEncryptor(passphrase=PASS),
        "streamcrypt.codecs.EnvelopeDecryptor": lambda: envelope.EnvelopeDecryptor(
            identities=[env_identity]
        ),
        "streamcrypt.codecs.FormatOptions": lambda: streamcrypt.codecs.FormatOptions(
            key=k(32), passphrase=PASS, password=PASS
        ),
        "streamcrypt.codecs.noise.CipherState": lambda: noise.CipherState("ChaChaPoly", k(32)),
        "streamcrypt.codecs.noise.FixedKeyCipher": lambda: noise.CipherState(
            "ChaChaPoly", k(32)
        ).fixed_key(),
        "streamcrypt.codecs.noise.SymmetricState": _symmetric_state,
        "streamcrypt.codecs.NoiseHandshake": lambda: noise.NoiseHandshake(
            "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s", True, psks=[k(32)]
        ),
        "streamcrypt.codecs.rclone.RcloneCodec": lambda: rclone.RcloneCodec(k(32), bytes(24)),
        "streamcrypt.codecs.rclone.RcloneKeys": _rclone_keys,
        "streamcrypt.codecs.rclone.RcloneNameCipher": lambda: rclone.RcloneNameCipher(
            _rclone_keys()
        ),
        "streamcrypt.codecs.RcloneEncryptor": lambda: rclone.RcloneEncryptor(_rclone_keys()),
        "streamcrypt.codecs.RcloneDecryptor": lambda: rclone.RcloneDecryptor(_rclone_keys()),
        "streamcrypt.codecs.records.ProtocolConfig": lambda: records.ProtocolConfig(
            False, k(32), MARK[32:64], None, False, "ChaChaPoly", "BLAKE2s", None
        ),
        "streamcrypt.codecs.secretstream.SecretStreamPuller": lambda: (
            secretstream.SecretStreamPuller(k(32), secretstream.SecretStreamPusher(k(32)).header)
        ),
        "streamcrypt.codecs.tink.AesCtrHmacCodec": lambda: tink.AesCtrHmacCodec.create(
            AesCtrHmacStreamingParams(32, 4096),
            k(32),
            MARK[32:64],
            bytes(7),
        ),
        "streamcrypt.codecs.tink.AesGcmHkdfCodec": lambda: tink.AesGcmHkdfCodec(
            AesGcmHkdfStreamingParams(32, 4096), k(32), bytes(7)
        ),
        "streamcrypt.codecs.tink.TinkKeyset": lambda: tink.TinkKeyset((_tink_raw(),), 0),
        "streamcrypt.codecs.tink.TinkStreamingKey": _tink_raw,
        "streamcrypt.codecs.TinkStreamEncryptor": lambda: tink.TinkStreamEncryptor(_tink_raw()),
        "streamcrypt.codecs.TinkStreamDecryptor": lambda: tink.TinkStreamDecryptor(_tink_raw()),
        "streamcrypt.primitives.ContentChunker": lambda: streamcrypt.primitives.ContentChunker(
            seed=SEED_INT
        ),
        "streamcrypt.primitives.Ed25519phSigner": lambda: streamcrypt.primitives.Ed25519phSigner(
            k(32)
        ),
        "streamcrypt.primitives.Blake3Tap": lambda: streamcrypt.primitives.Blake3Tap(key=k(32)),
        "streamcrypt.primitives.Blake2bTap": lambda: streamcrypt.primitives.Blake2bTap(key=k(32)),
        "streamcrypt.primitives.Blake2sTap": lambda: streamcrypt.primitives.Blake2sTap(key=k(32)),
        "streamcrypt.transports.EncryptionMiddleware": lambda: (
            streamcrypt.transports.EncryptionMiddleware(_no_app, key=_ring(16))
        ),
        "streamcrypt.transports.EncryptedListener": lambda: (
            streamcrypt.transports.EncryptedListener(_NoListener(), psk=k(32))
        ),
        "streamcrypt.KeyRing": _ring,
        "streamcrypt.SecretKey": lambda: SecretKey(k(32)),
    }


async def _no_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


class _NoListener:
    """Stands for an anyio listener the wrapper is never asked to serve."""

    async def serve(self, handler: Any, task_group: Any = None) -> None:
        raise AssertionError("never called")

    async def aclose(self) -> None:
        return None

    @property
    def extra_attributes(self) -> dict[Any, Any]:
        return {}


#: Classes that take a secret but are not built here, and why.
EXEMPT = {
    "streamcrypt.backup.Store": "made by Store.open/init from a store and a master key; "
    "holds BackupKeys, which are checked",
    "streamcrypt.primitives.Aead": "abstract base of the AEAD suites, which are checked",
    "streamcrypt.primitives.AesGcm": "abstract base of AES128GCM and AES256GCM",
    "streamcrypt.primitives.AesTransform": "abstract base of the AES modes, which are checked",
    "streamcrypt.primitives.MacTap": "abstract base of HmacTap and Poly1305Tap",
    "streamcrypt.codecs.SegmentCodec": "abstract base of the codecs, which are checked",
    "streamcrypt.codecs.SegmentedEncryptor": "base of the encryptors, which are checked",
    "streamcrypt.codecs.SegmentedDecryptor": "base of the decryptors, which are checked",
    "streamcrypt.codecs.tink.TinkStreamingCodec": "abstract base of the two Tink codecs",
    "streamcrypt.codecs.age.PluginUI": "holds the callbacks that answer a plugin "
    "(request_secret names one), no secret",
}

_NONCES = {"nonce": (12, 24, 8, 16), "iv": (16, 32), "tweak": (16,)}


def _generic(cls: type) -> object | None:
    """``cls(key)`` or ``cls(key, nonce/iv/tweak)`` with a marker key of a size it takes."""
    parameters = list(inspect.signature(cls).parameters.values())
    required = [p for p in parameters if p.default is p.empty and p.kind is not p.VAR_KEYWORD]
    names = [p.name for p in required]
    if not names or names[0] not in ("key", "seed") or len(names) > 2:
        return None
    second = _NONCES.get(names[1], ()) if len(names) == 2 else (None,)
    for size in (32, 16, 64, 24, 48):
        for extra in second:
            args: tuple[object, ...] = (k(size),) if extra is None else (k(size), bytes(extra))
            try:
                return cls(*args)
            except (InvalidParameterError, ValueError, TypeError):
                continue
    return None


def _build(name: str) -> object:
    factory = _factories().get(name)
    if factory is not None:
        return factory()
    built = _generic(HOLDERS[name])
    assert built is not None, f"no way to build {name}: add it to _factories or EXEMPT"
    return built


def _leaks_text(text: str) -> bool:
    fragments = (
        MARK[:6].hex(),
        MARK[:6].hex().upper(),
        repr(MARK[:6])[2:-1],
        base64.b64encode(MARK[:12]).decode(),
        base64.urlsafe_b64encode(MARK[:12]).decode(),
        PASS,
        str(SEED_INT),
        hex(SEED_INT)[2:],
    )
    return any(f in text for f in fragments)


def _error_messages(obj: object) -> list[str]:
    """The messages of the errors misuse raises: garbage input, calls out of order."""
    messages: list[str] = []
    calls: list[tuple[str, tuple[object, ...]]] = [
        ("update", (b"\x00" * 300,)),
        ("finalize", ()),
        ("finalize", ()),
        ("update", ("not bytes",)),
        ("open", (bytes(24), b"\x01" * 40)),
        ("decrypt", (bytes(24), b"\x01" * 40, None)),
        ("unwrap", ([],)),
        ("decrypt_name", ("not-a-name",)),
        ("read_message", (b"\x02" * 40,)),
    ]
    for method, args in calls:
        function = getattr(obj, method, None)
        if not callable(function):
            continue
        try:
            function(*args)
        except Exception as exc:
            chain: BaseException | None = exc
            seen: set[int] = set()
            while chain is not None and id(chain) not in seen:
                seen.add(id(chain))
                messages += [str(chain), repr(chain)]
                chain = chain.__cause__ or chain.__context__
    return messages


def _check(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        obj = _build(name)
        logging.getLogger("streamcrypt.test").warning("holder %r / %s", obj, obj)
        errors = _error_messages(obj)
    assert not _leaks_text(repr(obj)), f"{name}: the secret is in its repr: {obj!r}"
    assert not _leaks_text(str(obj)), f"{name}: the secret is in its str"
    assert not _leaks_text(caplog.text), f"{name}: the secret is in a log line"
    assert not any(_leaks_text(m) for m in errors), f"{name}: the secret is in an error message"


def test_the_rule_finds_the_key_holding_types() -> None:
    assert len(HOLDERS) > 90
    for name in (
        "streamcrypt.codecs.rclone.RcloneKeys",
        "streamcrypt.primitives.Eme",
        "streamcrypt.primitives.hazmat.XorCipher",
        "streamcrypt.SecretKey",
        "streamcrypt.codecs.records.ProtocolConfig",
    ):
        assert name in HOLDERS


def _cases() -> list[str]:
    return [name for name in sorted(HOLDERS) if name not in EXEMPT]


@pytest.mark.parametrize("name", _cases())
def test_no_secret_in_repr_str_logs_or_errors(name: str, caplog: pytest.LogCaptureFixture) -> None:
    _check(name, caplog)


#: Every way an object can be duplicated: a duplicate of a stateful encryptor reuses its
#: nonces (c1 ^ c2 = p1 ^ p2; with AES-GCM the GHASH key leaks), a pickle carries the key.
DUPLICATES: dict[str, Callable[[object], object]] = {
    **{f"pickle protocol {p}": functools.partial(pickle.dumps, protocol=p) for p in (0, 2, 5)},
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
}


def _used(name: str) -> object:
    """A holder after the calls a user makes (update, finalize): lazily built state such as a
    hasher must not decide whether it refuses."""
    obj = _build(name)
    _error_messages(obj)
    return obj


@pytest.mark.parametrize("state", ["fresh", "used"])
@pytest.mark.parametrize("how", sorted(DUPLICATES))
@pytest.mark.parametrize("name", _cases())
def test_holders_refuse_to_be_pickled_or_copied_with_a_clear_type_error(
    name: str, how: str, state: str
) -> None:
    obj = _build(name) if state == "fresh" else _used(name)
    with pytest.raises(TypeError, match="holds key material and is not picklable"):
        DUPLICATES[how](obj)


def test_a_monocypher_build_without_the_c_symbols_fails_with_a_clear_import_error() -> None:
    from streamcrypt.primitives import _curve25519

    with pytest.raises(ImportError, match="does not export Monocypher's crypto_nothing"):
        _curve25519.native("crypto_nothing", 32, SECRET)
