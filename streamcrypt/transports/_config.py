"""The checked options of the transports' public calls (private).

The public calls take explicit typed keywords and build one frozen config from them with
:func:`config_of`; the socket options (:class:`StreamConfig`) live here, the HTTP ones in
``_http.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from ..abc import Buffer
from ..codecs.records import DEFAULT_REKEY_INTERVAL, ProtocolConfig
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import InvalidParameterError
from ..keys import HoldsSecrets, SecretKey

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


def config_of(cls: type[C], given: Mapping[str, object]) -> C:
    """A ``cls`` config from a public call's ``locals()``: each field of ``cls`` the call
    takes as a keyword of the same name (the others keep their defaults)."""
    chosen: dict[str, Any] = {f.name: given[f.name] for f in fields(cls) if f.name in given}
    return cls(**chosen)


#: Seconds allowed for the whole handshake before the connection is closed.
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0
#: Seconds a ``receive()`` waits for the peer's next record (or a ``send()`` for the
#: transport) before the connection is declared stalled: long enough for interactive
#: protocols with pauses, short enough that a dead peer does not hold a connection.
DEFAULT_IDLE_TIMEOUT: Final = 300.0
#: Seconds allowed for a whole record, from the read that brought its first byte.
DEFAULT_RECORD_TIMEOUT: Final = 30.0

#: ``cipher=``: ``"auto"`` or the Noise cipher to insist on.
Cipher = Literal["auto", "AESGCM", "ChaChaPoly"]
#: ``hash=``: the Noise hash (both sides alike).
NoiseHash = Literal["BLAKE2s", "BLAKE2b", "SHA256", "SHA512"]
#: ``accept_peer(public_key) -> bool`` (or an awaitable of it).
AcceptPeer = Callable[[bytes], bool | Awaitable[bool]]
KeyInput = Buffer | SecretKey


def check_timeout(value: float | None, name: str) -> None:
    """The one rule of every timeout option (sockets, HTTP bodies): seconds > 0 or None."""
    if value is not None and (isinstance(value, bool) or not value > 0):
        raise InvalidParameterError(f"{name} must be a positive number of seconds or None")


@dataclass(frozen=True, slots=True, repr=False)
class StreamConfig(HoldsSecrets):
    """The options of :meth:`EncryptedStream.wrap` (documented there), checked once;
    secrets never repr'd. Bad options raise :class:`InvalidParameterError` here, or (a
    key missing for the side it is used on) when the connection starts, before any I/O.
    """

    psk: KeyInput | None = None
    static_key: KeyInput | None = None
    server_public_key: Buffer | None = None
    accept_peer: AcceptPeer | None = None
    cipher: str = "auto"
    hash: str = "BLAKE2s"
    rekey_interval: int | None = DEFAULT_REKEY_INTERVAL
    handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    record_timeout: float | None = DEFAULT_RECORD_TIMEOUT
    policy: OffloadPolicy | None = DEFAULT_POLICY

    def __post_init__(self) -> None:
        if self.policy is not None and not isinstance(self.policy, OffloadPolicy):
            raise InvalidParameterError(
                f"policy must be an OffloadPolicy or None, not {type(self.policy).__name__}"
            )
        for name in ("handshake_timeout", "idle_timeout", "record_timeout"):
            check_timeout(getattr(self, name), name)
        # What no side could use fails now; what one side lacks, when that side starts.
        ProtocolConfig.check_keys(
            psk=self.psk,
            static_key=self.static_key,
            server_public_key=self.server_public_key,
            cipher=self.cipher,
            hash=self.hash,
            rekey_interval=self.rekey_interval,
        )

    def protocol(self, *, server_side: bool) -> ProtocolConfig:
        """The checked protocol options for one side."""
        return ProtocolConfig.make(
            server_side=server_side,
            psk=self.psk,
            static_key=self.static_key,
            server_public_key=self.server_public_key,
            vets_peers=self.accept_peer is not None,
            cipher=self.cipher,
            hash=self.hash,
            rekey_interval=self.rekey_interval,
        )

    def __repr__(self) -> str:
        return (
            f"StreamConfig({self.cipher}, {self.hash}, "
            f"rekey_interval={self.rekey_interval}, <keys hidden>)"
        )

    __str__ = __repr__

    _pickle_advice = (
        "give each process its keys (a key file, a KeyRing serialized with a password) "
        "and build the options there"
    )
