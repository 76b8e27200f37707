"""Keyrings (raw AES and raw RSA: offline wrapping keys) and opening a header with them."""

from __future__ import annotations

import hmac
import struct
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...abc import Buffer
from ...errors import (
    AuthenticationError,
    InvalidKeySizeError,
    InvalidParameterError,
    UnknownKeyError,
)
from ...keys import HoldsSecrets, Pkcs11Key, constant_time_equal, random_bytes
from ._header import _IV, _TAG, _U16, AwsHeader, EncryptedDataKey, _derive, _header_tag


@runtime_checkable
class Keyring(Protocol):
    """Wraps a data key for a message and unwraps it from the message's data keys."""

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey: ...

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None: ...


def _text(value: str | bytes, what: str) -> bytes:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if not raw or len(raw) > _U16:
        raise InvalidParameterError(f"a keyring {what} must be 1..65535 bytes")
    return raw


class RawAesKeyring(HoldsSecrets):
    """The raw AES keyring: AES-GCM wrapping under a 128/192/256-bit key you hold, in
    memory or in a PKCS#11 token (a :class:`~streamcrypt.keys.Pkcs11Key`: the token runs
    the AES-GCM of the data key, the message is the same).

    Interoperates with the SDKs' raw AES keyring and ``RawMasterKey`` (AES-GCM wrapping):
    ``namespace`` is the provider id, ``name`` the key name. Raises
    :class:`InvalidKeySizeError`; with a token key, :class:`TokenError` when the token fails.
    """

    __slots__ = ("_aead", "_name", "_namespace")

    def __init__(
        self, namespace: str | bytes, name: str | bytes, wrapping_key: Buffer | Pkcs11Key
    ) -> None:
        self._namespace = _text(namespace, "namespace")
        self._name = _text(name, "key name")
        if isinstance(wrapping_key, Pkcs11Key):
            self._aead: AESGCM | Pkcs11Key = wrapping_key
            return
        key = bytes(wrapping_key)
        if len(key) not in (16, 24, 32):
            raise InvalidKeySizeError(
                f"a raw AES wrapping key is 16, 24 or 32 bytes, got {len(key)}"
            )
        self._aead = AESGCM(key)

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey:
        if isinstance(self._aead, Pkcs11Key):  # the token draws the IV: iv || ct || tag
            sealed = self._aead.wrap(data_key, aad=context)
            iv, ciphertext = sealed[:_IV], sealed[_IV:]
        else:
            iv = random_bytes(_IV)
            ciphertext = self._aead.encrypt(iv, data_key, context)
        info = self._name + struct.pack(">II", _TAG * 8, _IV) + iv
        return EncryptedDataKey(self._namespace, info, ciphertext)

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None:
        n = len(self._name)
        for edk in keys:
            info = edk.provider_info
            if edk.provider_id != self._namespace or len(info) != n + 8 + _IV:
                continue
            if info[:n] != self._name or info[n : n + 8] != struct.pack(">II", _TAG * 8, _IV):
                continue
            try:
                if isinstance(self._aead, Pkcs11Key):
                    return self._aead.unwrap(info[n + 8 :] + edk.ciphertext, aad=context)
                return self._aead.decrypt(info[n + 8 :], edk.ciphertext, context)
            except (InvalidTag, AuthenticationError):
                continue
        return None

    def __repr__(self) -> str:
        return f"RawAesKeyring({self._namespace.decode(errors='replace')!r}, {self._name.decode(errors='replace')!r}, <key hidden>)"


RsaPadding = Literal["oaep-sha1", "oaep-sha256", "oaep-sha384", "oaep-sha512", "pkcs1"]
_OAEP_HASH: dict[str, type[hashes.HashAlgorithm]] = {
    "oaep-sha1": hashes.SHA1,
    "oaep-sha256": hashes.SHA256,
    "oaep-sha384": hashes.SHA384,
    "oaep-sha512": hashes.SHA512,
}


class RawRsaKeyring(HoldsSecrets):
    """The raw RSA keyring: the data key encrypted to an RSA public key you hold.

    Give ``private_key`` to decrypt (and encrypt), or only ``public_key`` to encrypt: a
    ``cryptography`` key object or PEM bytes. ``padding``: ``"oaep-sha256"`` (default),
    ``"oaep-sha1"``, ``"oaep-sha384"``, ``"oaep-sha512"`` (MGF1 with the same hash) or
    ``"pkcs1"`` (v1.5, legacy). Raises :class:`InvalidParameterError`.
    """

    __slots__ = ("_name", "_namespace", "_padding", "_private", "_public")

    def __init__(
        self,
        namespace: str | bytes,
        name: str | bytes,
        *,
        private_key: rsa.RSAPrivateKey | bytes | None = None,
        public_key: rsa.RSAPublicKey | bytes | None = None,
        padding_scheme: RsaPadding = "oaep-sha256",
    ) -> None:
        self._namespace = _text(namespace, "namespace")
        self._name = _text(name, "key name")
        if isinstance(private_key, bytes):
            private_key = serialization.load_pem_private_key(private_key, None)  # type: ignore[assignment]
        if isinstance(public_key, bytes):
            public_key = serialization.load_pem_public_key(public_key)  # type: ignore[assignment]
        if private_key is not None and not isinstance(private_key, rsa.RSAPrivateKey):
            raise InvalidParameterError("private_key must be an RSA private key")
        if public_key is None and private_key is not None:
            public_key = private_key.public_key()
        if not isinstance(public_key, rsa.RSAPublicKey):
            raise InvalidParameterError("a raw RSA keyring needs an RSA public or private key")
        if padding_scheme == "pkcs1":
            self._padding: padding.AsymmetricPadding = padding.PKCS1v15()
        elif padding_scheme in _OAEP_HASH:
            algo = _OAEP_HASH[padding_scheme]
            self._padding = padding.OAEP(mgf=padding.MGF1(algo()), algorithm=algo(), label=None)
        else:
            raise InvalidParameterError(f"unknown RSA padding {padding_scheme!r}")
        self._private = private_key
        self._public = public_key

    def wrap(self, data_key: bytes, context: bytes) -> EncryptedDataKey:
        return EncryptedDataKey(
            self._namespace, self._name, self._public.encrypt(data_key, self._padding)
        )

    def unwrap(self, keys: Sequence[EncryptedDataKey], context: bytes) -> bytes | None:
        if self._private is None:
            return None
        for edk in keys:
            if edk.provider_id != self._namespace or edk.provider_info != self._name:
                continue
            try:
                return self._private.decrypt(edk.ciphertext, self._padding)
            except ValueError:
                continue
        return None

    def __repr__(self) -> str:
        return f"RawRsaKeyring({self._namespace.decode(errors='replace')!r}, {self._name.decode(errors='replace')!r})"


KeyringLike: TypeAlias = Keyring | Sequence[Keyring]


def _keyrings(keyring: KeyringLike) -> list[Keyring]:
    rings = [keyring] if isinstance(keyring, Keyring) else list(keyring)
    if not rings or not all(isinstance(r, Keyring) for r in rings):
        raise InvalidParameterError(
            "give one keyring or a list of keyrings (RawAesKeyring, RawRsaKeyring)"
        )
    return rings


def _open_header(header: AwsHeader, rings: Sequence[Keyring], expected: Mapping[str, str]) -> bytes:
    """Unwrap the data key, check the commitment, the header tag and the expected context;
    the derived AES-GCM key."""
    for k, v in expected.items():
        if header.encryption_context.get(k) != v:
            raise AuthenticationError(
                f"the message's encryption context does not hold the expected {k!r} entry"
            )
    ctx = header.context_bytes
    data_key = None
    for ring in rings:
        data_key = ring.unwrap(header.encrypted_data_keys, ctx)
        if data_key is not None:
            break
    if data_key is None:
        raise UnknownKeyError(
            "none of the message's encrypted data keys opens with the given keyrings: "
            "check the keyring namespace, key name and wrapping key"
        )
    key, commitment = _derive(header.suite, data_key, header.message_id)
    if header.suite.committing and not constant_time_equal(commitment, header.commitment):
        raise AuthenticationError("the key commitment does not match: a wrong or forged data key")
    iv = header.auth_iv or bytes(_IV)
    if not hmac.compare_digest(_header_tag(key, header.body, iv), header.auth_tag):
        raise AuthenticationError("the message header did not verify: tampered header")
    return key
