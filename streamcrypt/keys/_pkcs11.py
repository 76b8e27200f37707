"""Keys that never leave a PKCS#11 token (an HSM, a smart card, SoftHSM2).

Theory of operation
-------------------
A :class:`Pkcs11Key` names an AES-256 secret key object inside a token: the token's
module (the ``.so``), the token's label, and the key's label or ``CKA_ID``. The key is
``CKA_EXTRACTABLE`` false and ``CKA_SENSITIVE`` true (a key that is not is refused), so
its bytes are never in this process. What the token does with it is AES-256-GCM on
small inputs: :meth:`Pkcs11Key.wrap` seals a data key made in software (per stream, per
message) under a fresh 12-byte IV and returns ``iv || ciphertext || tag``;
:meth:`Pkcs11Key.unwrap` opens such a blob inside the token. Bulk data is then
encrypted in software under the data key, so a token key costs one token call per
stream, not per byte (docs/FORMAT.md, "Token-wrapped data keys", says why GCM).

Sessions: a module is initialized without locking callbacks (python-pkcs11 passes
``NULL`` to ``C_Initialize``), so the library may not be entered by two threads at once:
every call into a token goes through one lock per process. Each token has one logged-in
session per process, opened on first use and shared by every key on that token (login is
per application, not per session, in PKCS#11). A forked child inherits the parent's
handles but not its library state: the first call in a child finalizes and initializes
the module again and opens its own session (asking the PIN source again); the pid is checked on every call, so no fork hook
is needed. A session the token no longer knows (closed, token removed) is dropped on the
error it causes; the next call opens another. Opening a session, finding a key and
making one also take a lock across processes (:func:`_across_processes`): SoftHSM2's
token file is not safe against one process logging in while another starts.

PINs come from a callback or an environment variable, read when a session is opened; the
key object keeps the source, never the PIN, and refuses to pickle. The process keeps an
HMAC of the PIN under a random per-process key, to refuse a second key on the same token
with another PIN (the login is already made: the token would not check it).
"""

from __future__ import annotations

import fcntl
import hmac
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    InvalidParameterError,
    TokenError,
    TokenPinError,
    UnknownKeyError,
)
from ._secret import HoldsSecrets, key_bytes, random_bytes

__all__ = ["Pkcs11Key"]

#: The GCM IV and tag sizes of a wrapped blob: ``iv || ciphertext || tag``.
IV_SIZE = 12
TAG_SIZE = 16
#: The largest input :meth:`Pkcs11Key.wrap` takes (data keys, not data).
MAX_WRAP_SIZE = 1024

PinSource = Callable[[], str]


def _library() -> Any:
    """python-pkcs11, or the error saying how to install it."""
    try:
        import pkcs11
    except ImportError:
        raise TokenError(
            "PKCS#11 keys need python-pkcs11: pip install 'streamcrypt[pkcs11]'"
        ) from None
    return pkcs11


@dataclass(eq=False)
class _Token:
    """One token's logged-in session in this process, and a digest of the PIN it took
    (so a second key on the token with another PIN is refused, not silently let in)."""

    session: Any
    pin_digest: bytes


@dataclass(eq=False)
class _Process:
    """Everything about tokens that belongs to one process: rebuilt after ``fork``."""

    pid: int = field(default_factory=os.getpid)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tokens: dict[tuple[str, str], _Token] = field(default_factory=dict)
    #: Keyed the PIN digests, so a digest tells nothing outside this process.
    pin_key: bytes = field(default_factory=lambda: random_bytes(32))


_PROCESS = _Process()
#: The pid each module was last initialized in (python-pkcs11 caches one handle per path).
_INITIALIZED: dict[str, int] = {}


def _process() -> _Process:
    """This process's token state: a fresh one (new lock, no sessions) after a fork."""
    global _PROCESS
    state = _PROCESS
    if state.pid != os.getpid():
        state = _PROCESS = _Process()
    return state


def _pkcs11_error(exc: Exception, where: str) -> TokenError:
    """The typed error for a failure of the token library at ``where`` (no PIN in it)."""
    p11 = _library()
    if isinstance(exc, p11.PinIncorrect | p11.PinLenRange):
        return TokenPinError(f"{where}: the token refused the PIN (wrong PIN)")
    if isinstance(exc, p11.PinLocked | p11.PinExpired):
        return TokenPinError(f"{where}: the token's PIN is locked or expired")
    return TokenError(f"{where}: the token failed ({type(exc).__name__})")


class Pkcs11Key(HoldsSecrets):
    """An AES-256 key held in a PKCS#11 token: wraps and unwraps data keys there.

    ``module`` is the PKCS#11 library path (e.g. ``/usr/lib/softhsm/libsofthsm2.so``),
    ``token`` the token's label, ``label`` and/or ``object_id`` (``CKA_ID``) pick the key.
    The PIN comes from ``pin`` (a callable returning it) or the environment variable
    named by ``pin_env``; it is read when a session is opened, never stored. ``key_id``
    is the key's id in a :class:`~streamcrypt.keys.KeyRing` and in container headers
    (default: the label, else the hex ``CKA_ID``). The token is opened at once, so a
    wrong PIN or a missing key shows here.

    Raises :class:`TokenError` (module, token or key unusable; an extractable key is
    refused), :class:`TokenPinError` (wrong, missing or locked PIN),
    :class:`UnknownKeyError` (no such key in the token), :class:`InvalidParameterError`.
    """

    __slots__ = ("_key", "_label", "_module", "_object_id", "_pin", "_slot", "_token", "key_id")

    _pickle_advice = "give each process the key's PKCS#11 URI and a PIN source"

    def __init__(
        self,
        module: str,
        token: str,
        *,
        label: str | None = None,
        object_id: bytes | None = None,
        pin: PinSource | None = None,
        pin_env: str | None = None,
        key_id: str | None = None,
    ) -> None:
        if not isinstance(module, str) or not module:
            raise InvalidParameterError("module must be the path of a PKCS#11 library")
        if not isinstance(token, str) or not token:
            raise InvalidParameterError("token must be the token's label")
        if label is None and object_id is None:
            raise InvalidParameterError("name the key in the token by label= or object_id=")
        if isinstance(pin, str | bytes):
            raise InvalidParameterError(
                "pin must be a callable returning the PIN (or use pin_env=), never the PIN "
                "itself, so no key object holds it"
            )
        if pin is not None and pin_env is not None:
            raise InvalidParameterError("give pin= or pin_env=, not both")
        self._module = module
        self._token = token
        self._label = label
        self._object_id = None if object_id is None else bytes(object_id)
        self._pin = pin if pin is not None else _env_pin(pin_env) if pin_env else None
        self.key_id = key_id if key_id is not None else label or bytes(object_id or b"").hex()
        if not isinstance(self.key_id, str) or len(self.key_id.encode(errors="replace")) > 255:
            raise InvalidParameterError("a key id is a str of at most 255 bytes of UTF-8")
        self._key: Any = None
        #: The session ``_key`` was found in: a key is found again in any other (a forked
        #: child's, or one opened after the token dropped the last).
        self._slot: _Token | None = None
        with self._locked():
            pass  # open the session and find the key now: errors at the call that names it

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_uri(
        cls, uri: str, *, pin: PinSource | None = None, key_id: str | None = None
    ) -> Pkcs11Key:
        """Open the key an RFC 7512 URI names: ``pkcs11:token=T;object=L?module-path=P``
        (also ``id=%01%02``; ``pin-source=env:NAME`` for the PIN, unless ``pin`` is given;
        a ``pin-value`` is refused, a PIN never belongs in a URI). Raises as the
        constructor, and :class:`InvalidParameterError` for a malformed URI."""
        return cls(**_parse_uri(uri, pin), key_id=key_id)

    @classmethod
    def generate(
        cls, uri: str, *, pin: PinSource | None = None, key_id: str | None = None
    ) -> Pkcs11Key:
        """Make a new AES-256 key in the token the URI names, non-extractable and
        sensitive, labelled and identified as the URI says; return it opened.

        Raises :class:`InvalidParameterError` if the token already has a key of that
        label or id, and as :meth:`from_uri`.
        """
        return cls._create(uri, None, pin, key_id)

    @classmethod
    def import_key(
        cls, uri: str, material: Buffer, *, pin: PinSource | None = None, key_id: str | None = None
    ) -> Pkcs11Key:
        """Put a known 32-byte AES key into the token (for tests and migrations: the
        bytes were in this process), marked non-extractable and sensitive from creation.

        Raises :class:`InvalidKeySizeError` and as :meth:`generate`.
        """
        raw = key_bytes(material, "a PKCS#11 AES key", 32)
        return cls._create(uri, raw, pin, key_id)

    @classmethod
    def _create(
        cls, uri: str, material: bytes | None, pin: PinSource | None, key_id: str | None
    ) -> Pkcs11Key:
        """Make the key the URI names in its token (generated, or ``material``) and open it."""
        p11 = _library()
        where = _parse_uri(uri, pin)
        try:
            cls(**where, key_id=key_id)
        except UnknownKeyError:
            pass  # none of that name yet; the token's session is open now
        else:
            raise InvalidParameterError(
                f"token {where['token']!r} already holds a key of that label or id; choose another"
            )
        attrs: dict[Any, Any] = {
            p11.Attribute.TOKEN: True,
            p11.Attribute.PRIVATE: True,
            p11.Attribute.SENSITIVE: True,
            p11.Attribute.EXTRACTABLE: False,
            p11.Attribute.ENCRYPT: True,
            p11.Attribute.DECRYPT: True,
            p11.Attribute.WRAP: False,
            p11.Attribute.UNWRAP: False,
            p11.Attribute.SIGN: False,
            p11.Attribute.VERIFY: False,
            p11.Attribute.DERIVE: False,
            p11.Attribute.MODIFIABLE: False,
        }
        if where.get("label") is not None:
            attrs[p11.Attribute.LABEL] = where["label"]
        if where.get("object_id") is not None:
            attrs[p11.Attribute.ID] = where["object_id"]
        state = _process()
        with state.lock, _across_processes(where["module"]):
            session = state.tokens[(where["module"], where["token"])].session  # opened above
            try:
                if material is None:
                    session.generate_key(p11.KeyType.AES, 256, store=True, template=attrs)
                else:
                    attrs[p11.Attribute.CLASS] = p11.ObjectClass.SECRET_KEY
                    attrs[p11.Attribute.KEY_TYPE] = p11.KeyType.AES
                    attrs[p11.Attribute.VALUE] = material
                    session.create_object(attrs)
            except p11.PKCS11Error as exc:
                raise _pkcs11_error(exc, f"making a key in token {where['token']!r}") from None
        return cls(**where, key_id=key_id)

    # ------------------------------------------------------------------ operations

    def wrap(self, data: bytes, *, aad: Buffer = b"") -> bytes:
        """Seal ``data`` (a data key, at most 1 KiB) in the token with AES-256-GCM under a
        fresh IV: ``iv(12) || ciphertext || tag(16)``; ``aad`` is bound to it.

        Raises :class:`TokenError`, :class:`TokenPinError`, :class:`InvalidParameterError`.
        """
        raw = bytes(key_bytes(data, "data to wrap"))
        if len(raw) > MAX_WRAP_SIZE:
            raise InvalidParameterError(f"wrap takes data keys of at most {MAX_WRAP_SIZE} bytes")
        iv = random_bytes(IV_SIZE)
        p11 = _library()
        with self._locked() as key:
            sealed = key.encrypt(
                raw, mechanism=p11.Mechanism.AES_GCM, mechanism_param=_gcm(p11, iv, aad)
            )
        return iv + bytes(sealed)

    def unwrap(self, wrapped: bytes, *, aad: Buffer = b"") -> bytes:
        """Open a blob :meth:`wrap` made (with the same ``aad``) inside the token.

        Raises :class:`AuthenticationError` for a blob that does not open (another key,
        another ``aad``, tampered, truncated), :class:`TokenError` if the token fails.
        """
        blob = bytes(wrapped)
        if len(blob) < IV_SIZE + TAG_SIZE or len(blob) > IV_SIZE + MAX_WRAP_SIZE + TAG_SIZE:
            raise AuthenticationError("the wrapped key did not open: it has the wrong size")
        p11 = _library()
        with self._locked() as key:
            try:
                opened = key.decrypt(
                    blob[IV_SIZE:],
                    mechanism=p11.Mechanism.AES_GCM,
                    mechanism_param=_gcm(p11, blob[:IV_SIZE], aad),
                )
            except (
                p11.EncryptedDataInvalid,
                p11.EncryptedDataLenRange,
                p11.GeneralError,
                p11.FunctionFailed,
                p11.DataInvalid,
                p11.DataLenRange,
            ):
                # SoftHSM2 answers CKR_GENERAL_ERROR for a failed GCM tag; the standard
                # says CKR_ENCRYPTED_DATA_INVALID: both are the one authentication error.
                raise AuthenticationError(
                    f"the wrapped key did not open with {self!r}: another key or "
                    "associated data, or a tampered blob"
                ) from None
        return bytes(opened)

    def attributes(self) -> dict[str, bool]:
        """The key object's protection as the token reports it: ``extractable``,
        ``sensitive``, ``never_extractable``, ``always_sensitive`` (for audits and tests)."""
        p11 = _library()
        names = {
            "extractable": p11.Attribute.EXTRACTABLE,
            "sensitive": p11.Attribute.SENSITIVE,
            "never_extractable": p11.Attribute.NEVER_EXTRACTABLE,
            "always_sensitive": p11.Attribute.ALWAYS_SENSITIVE,
        }
        with self._locked() as key:
            return {name: bool(key[attr]) for name, attr in names.items()}

    # ------------------------------------------------------------------ sessions

    def _name(self) -> str:
        parts = []
        if self._label is not None:
            parts.append(f"label {self._label!r}")
        if self._object_id is not None:
            parts.append(f"id {self._object_id.hex()}")
        return " and ".join(parts)

    def _query(self, p11: Any) -> dict[Any, Any]:
        query: dict[Any, Any] = {p11.Attribute.CLASS: p11.ObjectClass.SECRET_KEY}
        if self._label is not None:
            query[p11.Attribute.LABEL] = self._label
        if self._object_id is not None:
            query[p11.Attribute.ID] = self._object_id
        return query

    def _read_pin(self) -> str:
        if self._pin is None:
            raise TokenPinError(
                f"token {self._token!r} needs a PIN: pass pin= (a callable) or pin_env="
            )
        value = self._pin()
        if not isinstance(value, str) or not value:
            raise TokenPinError(f"the PIN source for token {self._token!r} gave no PIN")
        return value

    @contextmanager
    def _session(self) -> Iterator[_Token]:
        """This process's logged-in session on the key's token, under the process lock
        (and under :func:`_across_processes` unless this key's session is open here)."""
        state = _process()
        with state.lock:
            slot = state.tokens.get((self._module, self._token))
            if slot is not None and slot is self._slot:
                yield slot
                return
            pin = self._read_pin()  # first: a prompt must not hold other processes up
            with _across_processes(self._module):
                yield self._open_session(state, pin)

    def _open_session(self, state: _Process, pin: str) -> _Token:
        p11 = _library()
        slot = state.tokens.get((self._module, self._token))
        digest = hmac.digest(state.pin_key, pin.encode(), "sha256")
        where = f"token {self._token!r} of {self._module}"
        if slot is not None:
            if not hmac.compare_digest(slot.pin_digest, digest):
                raise TokenPinError(
                    f"{where}: the PIN differs from the one the token took in this process "
                    "(wrong PIN)"
                )
            return slot
        try:
            lib = p11.lib(self._module)
            if _INITIALIZED.setdefault(self._module, state.pid) != state.pid:
                try:  # a forked child: the module's state is the parent's
                    lib.finalize()
                except p11.PKCS11Error:
                    pass
                lib.initialize()
                _INITIALIZED[self._module] = state.pid
        except (OSError, RuntimeError) as exc:
            raise TokenError(
                f"cannot load the PKCS#11 module {self._module}: {type(exc).__name__}"
            ) from None
        try:
            token = lib.get_token(token_label=self._token)
        except p11.NoSuchToken:
            raise TokenError(f"no token labelled {self._token!r} in {self._module}") from None
        except p11.PKCS11Error as exc:
            raise _pkcs11_error(exc, where) from None
        try:
            session = token.open(rw=True, user_pin=pin)
        except p11.UserAlreadyLoggedIn:  # logged in by other code of this process
            session = token.open(rw=True)
        except p11.PKCS11Error as exc:
            raise _pkcs11_error(exc, where) from None
        slot = state.tokens[(self._module, self._token)] = _Token(session, digest)
        return slot

    @contextmanager
    def _locked(self) -> Iterator[Any]:
        """The key's token object, found once per session, with the process lock held.

        A failure of the token library in the block is :class:`TokenError`; one that says
        the session is gone (closed, token removed, logged out) also drops it, so the
        next call opens a new one."""
        p11 = _library()
        with self._session() as slot:
            if self._slot is not slot:
                self._key = self._find(p11, slot.session)
                self._slot = slot
            try:
                yield self._key
            except p11.PKCS11Error as exc:
                if isinstance(exc, _session_gone(p11)):
                    state = _process()
                    if state.tokens.get((self._module, self._token)) is slot:
                        del state.tokens[(self._module, self._token)]
                    self._slot = None
                raise _pkcs11_error(exc, f"using {self!r}") from None

    def _find(self, p11: Any, session: Any) -> Any:
        where = f"token {self._token!r}"
        try:
            found = list(session.get_objects(self._query(p11)))
            if not found:
                raise UnknownKeyError(f"{where} holds no secret key with {self._name()}")
            if len(found) > 1:
                raise TokenError(f"{where} holds {len(found)} keys with {self._name()}; name one")
            key = found[0]
            if key[p11.Attribute.KEY_TYPE] != p11.KeyType.AES or key[p11.Attribute.VALUE_LEN] != 32:
                raise TokenError(f"the key with {self._name()} in {where} is not AES-256")
            if key[p11.Attribute.EXTRACTABLE] or not key[p11.Attribute.SENSITIVE]:
                raise TokenError(
                    f"the key with {self._name()} in {where} is extractable or not sensitive: "
                    "its bytes could leave the token, so streamcrypt refuses it"
                )
        except p11.PKCS11Error as exc:
            raise _pkcs11_error(exc, where) from None
        return key

    def __repr__(self) -> str:
        return f"Pkcs11Key(token={self._token!r}, {self._name()}, key_id={self.key_id!r})"

    __str__ = __repr__


@contextmanager
def _across_processes(module: str) -> Iterator[None]:
    """An exclusive ``flock`` on the module's file, held while this process initializes
    the module, logs in, finds a key or makes one: SoftHSM2 2.6 rewrites its token file
    at login and reads it at initialization without a lock that covers both, so a process
    starting beside another one logging in loses the token (``CKR_GENERAL_ERROR``, no
    token of the label). Measured: forked siblings, 1 or 2 of 6 failed in each of 3
    runs; fresh processes on a token of 40 keys, 1 of 18; with this lock, none of 18
    either way. A lock on the module file, not a file of ours, so processes share it with
    no path to agree on; steady-state calls (a session and key already found) skip it."""
    try:
        handle = open(module, "rb")
    except OSError:
        yield  # loading will fail with its own typed error
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _session_gone(p11: Any) -> tuple[type[Exception], ...]:
    """The library's errors that mean the session (not the operation) is gone."""
    return (
        p11.SessionHandleInvalid,
        p11.SessionClosed,
        p11.DeviceRemoved,
        p11.TokenNotPresent,
        p11.UserNotLoggedIn,
        p11.ObjectHandleInvalid,
    )


def _gcm(p11: Any, iv: bytes, aad: Buffer) -> Any:
    extra = as_bytes(aad, "aad")
    return p11.mechanisms.GCMParams(iv, extra or None, TAG_SIZE * 8)


def _env_pin(name: str) -> PinSource:
    """A PIN source reading the environment variable ``name`` when a session opens."""

    def read() -> str:
        value = os.environ.get(name)
        if not value:
            raise TokenPinError(f"the PIN variable {name} is not set in the environment")
        return value

    return read


#: What a PKCS#11 URI may carry (RFC 7512), with this module's names for it.
_PATH_ATTRS = {"token": "token", "object": "label", "id": "object_id"}
_QUERY_ATTRS = {"module-path": "module", "pin-source": "pin_env"}


def _parse_uri(uri: str, pin: PinSource | None) -> dict[str, Any]:
    """The constructor's keywords from an RFC 7512 URI (the subset :meth:`from_uri`
    documents). Raises :class:`InvalidParameterError` naming what is wrong (never a
    value: a malformed URI may hold a PIN)."""
    if not isinstance(uri, str) or not uri.startswith("pkcs11:"):
        raise InvalidParameterError("a PKCS#11 URI starts with 'pkcs11:'")
    path, _, query = uri[len("pkcs11:") :].partition("?")
    out: dict[str, Any] = {}
    for part, names, sep in ((path, _PATH_ATTRS, ";"), (query, _QUERY_ATTRS, "&")):
        for item in filter(None, part.split(sep)):
            name, eq, value = item.partition("=")
            if name == "pin-value":
                raise InvalidParameterError(
                    "a PKCS#11 URI with pin-value is refused: give the PIN by pin= or "
                    "pin-source=env:NAME"
                )
            if name not in names or not eq:
                raise InvalidParameterError(
                    f"unsupported PKCS#11 URI attribute {name!r}; this reads "
                    "token, object, id, module-path, pin-source"
                )
            if names[name] in out:
                raise InvalidParameterError(f"PKCS#11 URI attribute {name!r} given twice")
            if name == "id":
                out["object_id"] = unquote(value, encoding="latin-1").encode("latin-1")
            elif name == "pin-source":
                if not value.startswith("env:") or len(value) == 4:
                    raise InvalidParameterError("pin-source must be env:NAME")
                out["pin_env"] = value[4:]
            else:
                out[names[name]] = unquote(value, errors="strict")
    if "module" not in out or "token" not in out:
        raise InvalidParameterError("a PKCS#11 URI here needs token= and module-path=")
    if pin is not None:
        out.pop("pin_env", None)
        out["pin"] = pin
    return out
