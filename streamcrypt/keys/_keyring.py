"""KeyRing: named keys, one active for encryption, older ones kept for decryption.

Serialized form (:meth:`KeyRing.to_json`), version 1, a JSON object::

    {"streamcrypt_keyring": 1,
     "active": "<id>",
     "keys": [{"id": "<id>", "size": 32}, ...],
     "kdf": {"alg": "argon2id", "ops": 2, "mem": 67108864, "salt": "<base64>"},
          (or {"alg": "scrypt", "n": 131072, "r": 8, "p": 1, "salt": "<base64>"})
     "cipher": "chacha20-poly1305",
     "nonce": "<base64, 12 bytes>",
     "secrets": "<base64: ChaCha20-Poly1305 of the key bytes, concatenated in 'keys' order>"}

The wrapping key is the password through the KDF with a fresh 16-byte salt. Everything
but ``secrets`` is bound to it as associated data, in canonical form (``json.dumps`` with
sorted keys and no spaces), so a changed id, order, size, active key or KDF parameter
fails authentication exactly as a wrong password does. The clear form (only with
``insecure_plaintext=True``) has ``"kdf": null``, ``"cipher": null``, no nonce, and the
base64 key bytes in ``secrets``.

Constant time: key ids are public (every container header carries one in clear), so
looking a key up by id is an ordinary dict lookup. Key *material* is only ever compared
in constant time: :meth:`KeyRing.find` scans every key with ``hmac.compare_digest`` and
never stops early, so its timing does not tell which key matched or where two keys
differ. Deserialization checks the one AEAD tag, in constant time, before any key is
built.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Iterable, Iterator
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from ..abc import Buffer
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from ._json import load_json
from ._password import (
    ARGON2_SALT_SIZE,
    MAX_READ_PARAMS,
    MAX_SCRYPT_READ_PARAMS,
    MODERATE,
    Argon2Params,
    PasswordParams,
    ScryptParams,
    check_read_params,
    derive_key_from_password,
)
from ._pkcs11 import Pkcs11Key
from ._secret import HoldsSecrets, SecretKey, random_bytes

#: What a key ring holds: key bytes in memory, or a key that stays in a PKCS#11 token.
RingKey = SecretKey | Pkcs11Key

_FORMAT = "streamcrypt_keyring"
_VERSION = 1
_CIPHER = "chacha20-poly1305"
_NONCE_SIZE = 12


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise FormatError(f"key ring field {what!r} must be a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise FormatError(f"key ring field {what!r} is not valid base64") from None


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _kdf_doc(params: PasswordParams, salt: bytes) -> dict[str, Any]:
    if isinstance(params, Argon2Params):
        return {"alg": "argon2id", "ops": params.ops, "mem": params.mem, "salt": _b64(salt)}
    return {"alg": "scrypt", "n": params.n, "r": params.r, "p": params.p, "salt": _b64(salt)}


def _kdf_params(doc: object) -> tuple[PasswordParams, bytes]:
    if not isinstance(doc, dict):
        raise FormatError("key ring field 'kdf' must be an object")
    alg = doc.get("alg")
    fields = {"argon2id": {"alg", "ops", "mem", "salt"}, "scrypt": {"alg", "n", "r", "p", "salt"}}
    if not isinstance(alg, str):
        raise FormatError("key ring field 'kdf.alg' must be a string")
    if alg not in fields:
        raise UnsupportedFormatError(f"unknown key ring KDF {alg!r}; this reads argon2id, scrypt")
    if set(doc) != fields[alg]:
        raise FormatError(f"key ring {alg} KDF must have exactly the fields {sorted(fields[alg])}")
    salt = _unb64(doc["salt"], "kdf.salt")
    try:
        params: PasswordParams = (
            Argon2Params(doc["ops"], doc["mem"])
            if alg == "argon2id"
            else ScryptParams(doc["n"], doc["r"], doc["p"])
        )
    except InvalidParameterError as exc:
        raise FormatError(f"key ring KDF parameters are out of range: {exc}") from None
    if alg == "argon2id" and len(salt) != ARGON2_SALT_SIZE:
        raise FormatError(f"key ring Argon2id salt must be {ARGON2_SALT_SIZE} bytes")
    return params, salt


class KeyRing(HoldsSecrets):
    """Keys by id. Encrypt with :attr:`active`; decrypt with whichever key a header names.

    Rotation adds a new active key and keeps the old ones, so data written under them
    stays readable without re-encryption. ``repr`` lists ids only. Serialize with
    :meth:`to_json` (secrets encrypted under a password) and load with :meth:`from_json`.
    An entry may be a :class:`Pkcs11Key`, whose key stays in its token: formats that
    support it (the native container) then wrap a fresh data key per stream there.
    """

    __slots__ = ("_active", "_keys")

    _pickle_advice = "serialize it with to_json(password)"

    def __init__(self, keys: Iterable[RingKey] = (), *, active: str | None = None) -> None:
        self._keys: dict[str, RingKey] = {}
        self._active: str | None = None
        for key in keys:
            self.add(key)
        if active is not None:
            self.activate(active)
        elif self._keys:
            self._active = next(reversed(self._keys))

    def add(self, key: RingKey, *, activate: bool = False) -> None:
        """Add ``key`` (it must carry a unique, non-empty ``key_id``)."""
        if not isinstance(key, SecretKey | Pkcs11Key):
            raise InvalidParameterError(
                f"a KeyRing holds SecretKey or Pkcs11Key objects, not {type(key).__name__}"
            )
        if not key.key_id:
            raise InvalidParameterError("a key in a KeyRing needs a non-empty key_id")
        if key.key_id in self._keys:
            raise InvalidParameterError(f"key id {key.key_id!r} is already in the ring")
        self._keys[key.key_id] = key
        if activate or self._active is None:
            self._active = key.key_id

    def activate(self, key_id: str) -> None:
        """Make the key ``key_id`` the one used for encryption."""
        self.get(key_id)
        self._active = key_id

    def rotate(self, size: int = 32) -> SecretKey:
        """Generate a new key with a fresh random id, make it active and return it."""
        key = SecretKey.generate(size, key_id=random_bytes(8).hex())
        self.add(key, activate=True)
        return key

    def remove(self, key_id: str) -> RingKey:
        """Drop a retired key (data under it can no longer be decrypted here)."""
        key = self.get(key_id)
        if key_id == self._active:
            raise InvalidParameterError("cannot remove the active key; activate another first")
        del self._keys[key_id]
        return key

    @property
    def active(self) -> RingKey:
        """The key used for encryption. Raises :class:`UnknownKeyError` on an empty ring."""
        if self._active is None:
            raise UnknownKeyError("the KeyRing is empty: add or rotate in a key first")
        return self._keys[self._active]

    @property
    def active_id(self) -> str | None:
        """The id of the active key (``None`` on an empty ring)."""
        return self._active

    def get(self, key_id: str) -> RingKey:
        """The key with this id, or :class:`UnknownKeyError` (ids are public: plain lookup)."""
        try:
            return self._keys[key_id]
        except (KeyError, TypeError):
            raise UnknownKeyError(
                f"no key with id {key_id!r} in this KeyRing (known ids: {sorted(self._keys)})"
            ) from None

    def find(self, material: Buffer | SecretKey) -> str | None:
        """The id of the key whose bytes equal ``material``, or ``None``.

        Constant time in the key bytes: every key is compared with
        ``hmac.compare_digest`` and the scan never stops early.
        """
        probe = material.secret_bytes() if isinstance(material, SecretKey) else bytes(material)
        found: str | None = None
        for key_id, key in self._keys.items():
            if not isinstance(key, SecretKey):
                continue  # a token key's bytes are not here to compare
            if hmac.compare_digest(key.secret_bytes(), probe) and found is None:
                found = key_id
        return found

    def ids(self) -> list[str]:
        return list(self._keys)

    def wipe(self) -> None:
        """Best-effort overwrite of every key's bytes; the ring is empty afterwards."""
        for key in self._keys.values():
            if isinstance(key, SecretKey):
                key.wipe()
        self._keys.clear()
        self._active = None

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[RingKey]:
        return iter(self._keys.values())

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self._keys)!r}, active={self._active!r})"

    __str__ = __repr__

    # ------------------------------------------------------------------ serialization

    def to_json(
        self,
        password: str | Buffer | None = None,
        *,
        insecure_plaintext: bool = False,
        params: PasswordParams = MODERATE,
    ) -> str:
        """Serialize the ring; secrets encrypted under ``password`` (see the module doc).

        ``params`` sets the KDF (Argon2id by default, MODERATE; ScryptParams for scrypt).
        Without a password the secrets would be written in clear: that raises
        :class:`InvalidParameterError` unless ``insecure_plaintext=True``.
        """
        secrets = [key for key in self._keys.values() if isinstance(key, SecretKey)]
        if len(secrets) != len(self._keys):
            raise InvalidParameterError(
                "a KeyRing with a Pkcs11Key cannot be serialized (the key is in its token): "
                "keep the token key's URI and add the key to the ring when loading"
            )
        meta: dict[str, Any] = {
            _FORMAT: _VERSION,
            "active": self._active,
            "keys": [{"id": k.key_id, "size": len(k)} for k in secrets],
        }
        material = b"".join(key.secret_bytes() for key in secrets)
        if password is None:
            if not insecure_plaintext:
                raise InvalidParameterError(
                    "refusing to write key material in clear: pass a password, or "
                    "insecure_plaintext=True if you really mean it"
                )
            meta.update(kdf=None, cipher=None, secrets=_b64(material))
            return json.dumps(meta, sort_keys=True, indent=1)
        if insecure_plaintext:
            raise InvalidParameterError("pass either a password or insecure_plaintext=True")
        if not isinstance(params, Argon2Params | ScryptParams):
            raise InvalidParameterError("params must be Argon2Params or ScryptParams")
        salt = random_bytes(ARGON2_SALT_SIZE)
        nonce = random_bytes(_NONCE_SIZE)
        meta.update(kdf=_kdf_doc(params, salt), cipher=_CIPHER, nonce=_b64(nonce))
        wrap = derive_key_from_password(password, salt, params=params)
        sealed = ChaCha20Poly1305(wrap.secret_bytes()).encrypt(nonce, material, _canonical(meta))
        meta["secrets"] = _b64(sealed)
        return json.dumps(meta, sort_keys=True, indent=1)

    @classmethod
    def from_json(
        cls,
        text: str | Buffer,
        password: str | Buffer | None = None,
        *,
        insecure_plaintext: bool = False,
        max_params: Argon2Params = MAX_READ_PARAMS,
        max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
    ) -> KeyRing:
        """Load what :meth:`to_json` wrote.

        Raises :class:`AuthenticationError` for a wrong password or any tampering with an
        encrypted ring (and for a clear ring when a password was given: a swapped-in
        clear ring is refused unless ``insecure_plaintext=True``), :class:`FormatError`
        for malformed JSON (a member named twice in one object included),
        :class:`LimitExceededError` for KDF parameters above the caps (checked before any
        KDF work) or a KDF that cannot get its memory, :class:`InvalidParameterError` for
        an encrypted ring without a password.
        """
        doc = load_json(text, "key ring")
        if not isinstance(doc, dict) or doc.get(_FORMAT) != _VERSION:
            if isinstance(doc, dict) and _FORMAT in doc:
                raise UnsupportedFormatError(
                    f"unsupported key ring version {doc[_FORMAT]!r}; this reads {_VERSION}"
                )
            raise FormatError("not a streamcrypt key ring (missing 'streamcrypt_keyring': 1)")
        entries = doc.get("keys")
        if not isinstance(entries, list) or not all(
            isinstance(e, dict)
            and set(e) == {"id", "size"}
            and isinstance(e["id"], str)
            and isinstance(e["size"], int)
            and not isinstance(e["size"], bool)
            and e["size"] > 0
            for e in entries
        ):
            raise FormatError("key ring 'keys' must be a list of {'id': str, 'size': int > 0}")
        total = sum(e["size"] for e in entries)
        if doc.get("kdf") is None:
            if set(doc) != {_FORMAT, "active", "keys", "kdf", "cipher", "secrets"}:
                raise FormatError("clear key ring has missing or unexpected fields")
            if password is not None or not insecure_plaintext:
                raise AuthenticationError(
                    "this key ring is NOT encrypted; refusing it (a clear ring where an "
                    "encrypted one is expected may have been swapped in). Load it with "
                    "insecure_plaintext=True only if you wrote it that way"
                )
            material = _unb64(doc["secrets"], "secrets")
        else:
            if set(doc) != {_FORMAT, "active", "keys", "kdf", "cipher", "nonce", "secrets"}:
                raise FormatError("encrypted key ring has missing or unexpected fields")
            if doc["cipher"] != _CIPHER:
                raise UnsupportedFormatError(f"unknown key ring cipher {doc['cipher']!r}")
            if password is None:
                raise InvalidParameterError("this key ring is encrypted: pass its password")
            params, salt = _kdf_params(doc["kdf"])
            check_read_params(params, max_params=max_params, max_scrypt=max_scrypt)
            nonce = _unb64(doc["nonce"], "nonce")
            sealed = _unb64(doc["secrets"], "secrets")
            if len(nonce) != _NONCE_SIZE or len(sealed) != total + 16:
                raise AuthenticationError(
                    "key ring did not authenticate: its secrets do not match its key list "
                    "(tampered or truncated)"
                )
            meta = {k: v for k, v in doc.items() if k != "secrets"}
            wrap = derive_key_from_password(password, salt, params=params)
            try:
                material = ChaCha20Poly1305(wrap.secret_bytes()).decrypt(
                    nonce, sealed, _canonical(meta)
                )
            except InvalidTag:
                raise AuthenticationError(
                    "key ring did not authenticate: wrong password, or the file was altered"
                ) from None
        if len(material) != total:
            raise FormatError("key ring secrets do not match the sizes in its key list")
        ring = cls()
        pos = 0
        try:
            for entry in entries:
                ring.add(SecretKey(material[pos : pos + entry["size"]], key_id=entry["id"]))
                pos += entry["size"]
            active = doc["active"]
            if active is not None or ring:
                if not isinstance(active, str):
                    raise FormatError("key ring 'active' must name one of its keys")
                ring.activate(active)
        except (InvalidParameterError, UnknownKeyError) as exc:
            raise FormatError(f"key ring content is inconsistent: {exc}") from None
        return ring
