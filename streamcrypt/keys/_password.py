"""Password-derived keys: Argon2id (libsodium, through PyNaCl) and scrypt for compatibility.

Argon2id is libsodium's ``crypto_pwhash`` (Argon2id v1.3, one lane, no secret or
associated data): ``ops`` passes over ``mem`` bytes of memory. The three standard
parameter sets are libsodium's INTERACTIVE (2 passes, 64 MiB), MODERATE (3, 256 MiB) and
SENSITIVE (4, 1 GiB); :class:`Argon2Params` also takes custom values within libsodium's
bounds. scrypt (RFC 7914) runs through ``cryptography``.

Whoever *reads* parameters from outside (a stream header, a serialized key ring, an
encoded hash) must cap them before running the KDF, or a hostile input makes the reader
allocate gigabytes and spin for minutes: :func:`check_read_params` refuses parameters above
:data:`MAX_READ_PARAMS` (Argon2id) or :data:`MAX_SCRYPT_READ_PARAMS` (scrypt) with
:class:`LimitExceededError`. The rule is the same for both KDFs: the memory must not
exceed the cap's memory and the work (passes times memory) must not exceed the cap's work.

Passwords given as ``str`` are encoded as UTF-8 exactly as given (no Unicode
normalization: normalize before calling if your inputs may differ in form).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, TypeAlias

import nacl.exceptions
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from nacl.pwhash import argon2id as _argon2id

from ..abc import Buffer, as_bytes
from ..errors import (
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    UnsupportedFormatError,
)
from ._secret import SecretKey, secret_text_bytes

#: Bytes of salt Argon2id takes (libsodium's ``crypto_pwhash_SALTBYTES``).
ARGON2_SALT_SIZE: int = _argon2id.SALTBYTES


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidParameterError(f"{what} must be an integer, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class Argon2Params:
    """Argon2id cost: ``ops`` passes over ``mem`` bytes (a multiple of 1024).

    Bounds are libsodium's (``ops`` >= 1, ``mem`` >= 8 KiB); out of range raises
    :class:`InvalidParameterError`. The standard sets are class attributes
    ``INTERACTIVE``, ``MODERATE`` and ``SENSITIVE`` (also module constants).
    """

    ops: int
    mem: int

    INTERACTIVE: ClassVar[Argon2Params]
    MODERATE: ClassVar[Argon2Params]
    SENSITIVE: ClassVar[Argon2Params]

    def __post_init__(self) -> None:
        ops = _int(self.ops, "Argon2id ops")
        mem = _int(self.mem, "Argon2id mem")
        if not _argon2id.OPSLIMIT_MIN <= ops <= _argon2id.OPSLIMIT_MAX:
            raise InvalidParameterError(
                f"Argon2id ops must be {_argon2id.OPSLIMIT_MIN}..{_argon2id.OPSLIMIT_MAX}, got {ops}"
            )
        if not _argon2id.MEMLIMIT_MIN <= mem <= _argon2id.MEMLIMIT_MAX or mem % 1024:
            raise InvalidParameterError(
                f"Argon2id mem must be a multiple of 1024 bytes in "
                f"{_argon2id.MEMLIMIT_MIN}..{_argon2id.MEMLIMIT_MAX}, got {mem}"
            )

    @property
    def work(self) -> int:
        """Passes times memory: what the reader-side cap bounds besides memory."""
        return self.ops * self.mem


#: libsodium's INTERACTIVE Argon2id parameters: 2 passes over 64 MiB.
INTERACTIVE = Argon2Params(_argon2id.OPSLIMIT_INTERACTIVE, _argon2id.MEMLIMIT_INTERACTIVE)
#: libsodium's MODERATE Argon2id parameters: 3 passes over 256 MiB.
MODERATE = Argon2Params(_argon2id.OPSLIMIT_MODERATE, _argon2id.MEMLIMIT_MODERATE)
#: libsodium's SENSITIVE Argon2id parameters: 4 passes over 1 GiB.
SENSITIVE = Argon2Params(_argon2id.OPSLIMIT_SENSITIVE, _argon2id.MEMLIMIT_SENSITIVE)
Argon2Params.INTERACTIVE = INTERACTIVE
Argon2Params.MODERATE = MODERATE
Argon2Params.SENSITIVE = SENSITIVE


@dataclass(frozen=True, slots=True)
class ScryptParams:
    """scrypt cost (RFC 7914): ``n`` a power of two >= 2, block size ``r``, parallelism ``p``.

    RFC 7914's bounds apply: ``n < 2**(16 * r)`` and ``128 * r * p < 2**31`` (OpenSSL's
    limits too). :attr:`memory` is what OpenSSL really allocates, about ``128 * r * n``
    bytes for the usual small ``r`` and ``p``. Raises :class:`InvalidParameterError`.
    """

    n: int
    r: int = 8
    p: int = 1

    def __post_init__(self) -> None:
        n = _int(self.n, "scrypt n")
        r = _int(self.r, "scrypt r")
        p = _int(self.p, "scrypt p")
        if n < 2 or n & (n - 1) or n >= 1 << 64:
            raise InvalidParameterError(f"scrypt n must be a power of two in 2..2**63, got {n}")
        if r < 1 or p < 1 or 128 * r * p >= 1 << 31:
            raise InvalidParameterError(
                f"scrypt r and p must be positive with 128 * r * p < 2**31, got r={r}, p={p}"
            )
        if r < 4 and n >= 1 << (16 * r):
            raise InvalidParameterError(f"scrypt n must be below 2**(16 * r) = 2**{16 * r}")

    @property
    def log_n(self) -> int:
        return self.n.bit_length() - 1

    @property
    def memory(self) -> int:
        """Bytes OpenSSL allocates at the peak: ``128 * r * (n + 2 + 2 * p)``.

        OpenSSL allocates one block of ``B`` (``128 * r * p`` bytes) and ``V`` plus two
        scratch blocks (``128 * r * (n + 2)``); its final PBKDF2 copies ``B`` once more
        as its salt while the rest is still held. Measured with ``ru_maxrss`` in
        tests/test_password.py (``r`` near 10**5 and ``p`` up to 20: within 1% of this).
        """
        return 128 * self.r * (self.n + 2 + 2 * self.p)

    @property
    def work(self) -> int:
        return 128 * self.r * self.n * self.p


#: scrypt parameters for new data when scrypt is asked for: 2**17 (128 MiB), r = 8, p = 1.
SCRYPT_DEFAULT = ScryptParams(1 << 17)

#: The most a reader accepts from outside by default: libsodium's SENSITIVE (4 passes over
#: 1 GiB, a few seconds here). Pass a lower cap where a second of work is too much.
MAX_READ_PARAMS = SENSITIVE
#: The scrypt equivalent: 2**20 x r = 8 (1 GiB and 5 KiB as OpenSSL counts), p = 1.
MAX_SCRYPT_READ_PARAMS = ScryptParams(1 << 20)

#: Parameters of either password KDF.
PasswordParams: TypeAlias = Argon2Params | ScryptParams


def check_read_params(
    params: PasswordParams,
    *,
    max_params: Argon2Params = MAX_READ_PARAMS,
    max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
) -> None:
    """Refuse parameters read from outside that exceed the caps.

    Raises :class:`LimitExceededError` naming the parameters and the cap.
    """
    cap: PasswordParams = max_params if isinstance(params, Argon2Params) else max_scrypt
    mem = params.mem if isinstance(params, Argon2Params) else params.memory
    cap_mem = cap.mem if isinstance(cap, Argon2Params) else cap.memory
    if mem > cap_mem or params.work > cap.work:
        raise LimitExceededError(
            f"password KDF parameters {params} exceed the reader's cap {cap}; "
            "raise the cap only for input you trust"
        )


def derive_key_from_password(
    password: str | Buffer,
    salt: Buffer,
    *,
    params: PasswordParams = INTERACTIVE,
    length: int = 32,
    key_id: str = "",
) -> SecretKey:
    """A key of ``length`` bytes from ``password`` and ``salt`` (Argon2id or scrypt).

    Argon2id needs a 16-byte salt and ``length`` >= 16; scrypt takes any salt and
    ``length`` >= 1. Raises :class:`InvalidParameterError`, and
    :class:`LimitExceededError` when the process cannot get the KDF's memory.
    """
    pw = secret_text_bytes(password, "a password")
    salt_b = as_bytes(salt, "salt")
    if isinstance(params, Argon2Params):
        if len(salt_b) != ARGON2_SALT_SIZE:
            raise InvalidParameterError(
                f"an Argon2id salt must be {ARGON2_SALT_SIZE} bytes, got {len(salt_b)}"
            )
        if not _argon2id.BYTES_MIN <= length <= 1 << 16:
            raise InvalidParameterError(
                f"an Argon2id key must be {_argon2id.BYTES_MIN}..65536 bytes, asked for {length}"
            )
        with _kdf_memory(params):
            raw = _argon2id.kdf(length, pw, salt_b, opslimit=params.ops, memlimit=params.mem)
    elif isinstance(params, ScryptParams):
        if not 1 <= length <= 1 << 16:
            raise InvalidParameterError(f"a scrypt key must be 1..65536 bytes, asked for {length}")
        with _kdf_memory(params):
            raw = Scrypt(salt=salt_b, length=length, n=params.n, r=params.r, p=params.p).derive(pw)
    else:
        raise InvalidParameterError(
            f"params must be Argon2Params or ScryptParams, got {type(params).__name__}"
        )
    return SecretKey(raw, key_id=key_id)


@contextmanager
def _kdf_memory(params: PasswordParams) -> Iterator[None]:
    """Turn a KDF's failure to get memory into :class:`LimitExceededError`.

    cryptography raises ``MemoryError`` when OpenSSL's scrypt cannot allocate; libsodium's
    Argon2id reports a failed allocation as ``nacl.exceptions.RuntimeError`` (the
    parameters were validated before, so that is the only way it fails).
    """
    try:
        yield
    except (MemoryError, nacl.exceptions.RuntimeError):
        raise LimitExceededError(
            f"password KDF {params} needs more memory than this process can get"
        ) from None


def hash_password(password: str | Buffer, params: Argon2Params = INTERACTIVE) -> str:
    """The PHC-encoded Argon2id hash ``$argon2id$v=19$m=..,t=..,p=1$salt$hash`` (fresh salt)."""
    if not isinstance(params, Argon2Params):
        raise InvalidParameterError("hash_password takes Argon2Params (scrypt is for keys only)")
    with _kdf_memory(params):
        encoded = _argon2id.str(
            secret_text_bytes(password, "a password"), opslimit=params.ops, memlimit=params.mem
        )
    return encoded.decode("ascii")


# $argon2id$v=19$m=<KiB>,t=<passes>,p=1$<salt, unpadded base64>$<hash, unpadded base64>
_ENCODED = re.compile(
    r"\$argon2id\$v=19\$m=([1-9][0-9]{0,12}),t=([1-9][0-9]{0,9}),p=1"
    r"\$([A-Za-z0-9+/]{11,})\$([A-Za-z0-9+/]{22,})"
)


def _parse_encoded(encoded: str | Buffer) -> tuple[bytes, Argon2Params]:
    raw = encoded.encode("ascii", "replace") if isinstance(encoded, str) else bytes(encoded)
    text = raw.decode("ascii", "replace")
    if text.startswith("$") and not text.startswith("$argon2id$"):
        raise UnsupportedFormatError(
            "only $argon2id$ password hashes are supported (not argon2i/argon2d/scrypt/bcrypt)"
        )
    match = _ENCODED.fullmatch(text)
    if match is None:
        raise FormatError(
            "not a well-formed $argon2id$v=19$m=..,t=..,p=1$salt$hash string; "
            "check it was stored whole"
        )
    try:
        params = Argon2Params(int(match[2]), int(match[1]) * 1024)
    except InvalidParameterError as exc:
        raise FormatError(f"encoded Argon2id hash has out-of-range parameters: {exc}") from None
    return raw, params


def verify_password(
    encoded: str | Buffer, password: str | Buffer, *, max_params: Argon2Params = MAX_READ_PARAMS
) -> bool:
    """True if ``password`` matches the encoded Argon2id hash, False if it does not.

    A mismatch is an answer, not an error. A malformed string raises
    :class:`FormatError` (:class:`UnsupportedFormatError` for another algorithm), and
    parameters above ``max_params`` raise :class:`LimitExceededError` before any work.
    """
    raw, params = _parse_encoded(encoded)
    check_read_params(params, max_params=max_params)
    try:
        return bool(_argon2id.verify(raw, secret_text_bytes(password, "a password")))
    except nacl.exceptions.InvalidkeyError:
        return False


def password_needs_rehash(encoded: str | Buffer, params: Argon2Params = INTERACTIVE) -> bool:
    """True if the encoded hash was made with parameters other than ``params``.

    Raises :class:`FormatError` for a malformed string.
    """
    return _parse_encoded(encoded)[1] != params


def x25519_key_pair_from_password(
    password: str | Buffer, salt: Buffer, *, params: PasswordParams = INTERACTIVE
) -> tuple[SecretKey, bytes]:
    """(secret key, public key) of X25519, the secret derived from ``password`` and ``salt``.

    NimCypher's ``keyPairFromPassword``: the secret is :func:`derive_key_from_password`'s
    32-byte key (Argon2id by default), the public key its X25519 public key. The same
    password and salt always give the same pair. Raises :class:`InvalidParameterError`.
    """
    secret = derive_key_from_password(password, salt, params=params, length=32)
    public = (
        x25519.X25519PrivateKey.from_private_bytes(secret.secret_bytes())
        .public_key()
        .public_bytes_raw()
    )
    return secret, public
