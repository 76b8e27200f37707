"""``age-plugin-pkcs11``: an age plugin whose file keys are wrapped by a PKCS#11 token key.

age (and streamcrypt) run it as ``age-plugin-pkcs11 --age-plugin=recipient-v1`` or
``identity-v1`` for recipients ``age1pkcs111...`` and identities
``AGE-PLUGIN-PKCS11-1...``; ``age-plugin-pkcs11 --identity URI`` prints both for a key.
Both carry the same payload, the RFC 7512 ``pkcs11:`` URI of an AES key in a token,
UTF-8 (a URI with a PIN in it, ``pin-value``, is refused: a recipient is public). The
stanza is ``-> pkcs11 TAG`` with ``TAG`` the unpadded base64 of the first 4 bytes of
SHA-256(URI), so an identity skips the stanzas of other keys without a token call, and
the body is the file key as the token wrapped it (docs/FORMATS.md).

The plugin side of the protocol is the sans-I/O ``codecs.age._plugin.PluginServer``;
:func:`serve` is its blocking adapter over standard input and output. The token key
comes from one function, :func:`token_key` (``key_for`` of :func:`main`), so tests give a
software key with the same three names. A PIN the key asks for comes from the URI's
``pin-source=env:VAR``, else ``AGE_PLUGIN_PKCS11_PIN``, else the client (``request-secret``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO, Protocol

from ..codecs.age import (
    PluginIdentity,
    PluginRecipient,
    PluginReply,
    PluginServer,
    Stanza,
    UnwrapRequest,
    WrapRequest,
    plugin_identity,
    plugin_recipient,
)
from ..errors import AuthenticationError, FormatError, PluginError, StreamCryptError

NAME = "pkcs11"
STANZA_TYPE = "pkcs11"
_TAG_SIZE = 4
_MAX_WRAPPED = 1024
_PIN_ENV = "AGE_PLUGIN_PKCS11_PIN"


class TokenKey(Protocol):
    """What the plugin needs of a token key (``streamcrypt.keys.Pkcs11Key``)."""

    def wrap(self, data: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes) -> bytes: ...


#: Makes the key a URI names: ``key_for(uri, pin=...)``.
KeyFor = Callable[..., TokenKey]


def token_key(uri: str, *, pin: Callable[[], str] | None = None) -> TokenKey:
    """The token key ``uri`` names (:meth:`streamcrypt.keys.Pkcs11Key.from_uri`); raises
    :class:`PluginError` when the ``pkcs11`` extra is not installed."""
    try:
        from ..keys import Pkcs11Key

        return Pkcs11Key.from_uri(uri, pin=pin)
    except ImportError:
        pass  # raised below, outside the handler
    raise PluginError("this streamcrypt has no PKCS#11 support (install streamcrypt[pkcs11])")


def recipient_for(uri: str) -> str:
    """The recipient ``age1pkcs111...`` of the key ``uri`` names."""
    return plugin_recipient(NAME, _check_uri(uri).encode())


def identity_for(uri: str) -> str:
    """The identity ``AGE-PLUGIN-PKCS11-1...`` of the key ``uri`` names."""
    return plugin_identity(NAME, _check_uri(uri).encode())


def _check_uri(uri: str) -> str:
    if not uri.startswith("pkcs11:") or "pin-value=" in uri:
        raise FormatError("a PKCS#11 key is named by a pkcs11: URI without pin-value")
    return uri


def uri_of(text: str, kind: str) -> str:
    """The URI in a recipient or identity (``kind``) of this plugin; :class:`FormatError`
    if it is not one."""
    key = PluginRecipient(text) if kind == "recipient" else PluginIdentity(text)
    if key.name != NAME:
        raise FormatError(f"not a {NAME} plugin {kind}")
    try:
        return _check_uri(key.data.decode("utf-8"))
    except UnicodeDecodeError:
        raise FormatError("the PKCS#11 URI is not UTF-8") from None


def key_tag(uri: str) -> str:
    """The stanza argument that names the key: base64 of SHA-256(URI)[:4]."""
    digest = hashlib.sha256(uri.encode()).digest()[:_TAG_SIZE]
    return base64.b64encode(digest).decode().rstrip("=")


class _Session:
    """The blocking adapter: one :class:`PluginServer` over two pipes."""

    def __init__(self, machine: str, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.server = PluginServer(machine)  # type: ignore[arg-type]
        self._stdin, self._stdout = stdin, stdout

    def _flush(self) -> None:
        data = self.server.data_to_send()
        if data:
            self._stdout.write(data)
            self._stdout.flush()

    def next_event(self) -> WrapRequest | UnwrapRequest | PluginReply:
        self._flush()
        while (event := self.server.next_event()) is None:
            self.server.receive_data(self._stdin.read1(65536))  # type: ignore[attr-defined]
        return event

    def command(self, command: str, *args: str, body: bytes = b"") -> PluginReply:
        self.server.send(command, *args, body=body)
        reply = self.next_event()
        assert isinstance(reply, PluginReply)
        return reply

    def done(self) -> None:
        self.server.done()
        self._flush()

    def pin(self) -> str:
        """A PIN: from the environment, else asked of the client (``request-secret``)."""
        env = os.environ.get(_PIN_ENV)
        if env is not None:
            return env
        reply = self.command("request-secret", body=b"PIN for the PKCS#11 token")
        if not reply.ok:
            raise PluginError("no PIN for the PKCS#11 token: the client gave none")
        return reply.body.decode("utf-8", "replace")


def _pin_for(session: _Session, uri: str) -> Callable[[], str] | None:
    """Where the PIN for ``uri`` comes from: the URI's own ``pin-source`` when it names
    one (the key reads it), else :meth:`_Session.pin`."""
    return None if "pin-source=" in uri else session.pin


class _Failed(Exception):
    """An ``error`` was sent: the session ends (age stops at the first one)."""


def _error(session: _Session, *args: str, message: str) -> _Failed:
    session.command("error", *args, body=message.encode())
    return _Failed()


def _uris(session: _Session, kind: str, texts: Sequence[str]) -> list[str]:
    """The URIs in ``texts``; an ``error kind INDEX`` for the first that is not ours."""
    uris: list[str] = []
    for index, text in enumerate(texts):
        try:
            uris.append(uri_of(text, kind))
        except FormatError as exc:
            raise _error(session, kind, str(index), message=str(exc)) from None
    return uris


def _wrap(session: _Session, request: WrapRequest, key_for: KeyFor) -> None:
    uris = _uris(session, "recipient", request.recipients)
    uris += _uris(session, "identity", request.identities)
    try:
        keys = [key_for(uri, pin=_pin_for(session, uri)) for uri in uris]
        stanzas = [
            (index, Stanza((STANZA_TYPE, key_tag(uri)), key.wrap(file_key)))
            for index, file_key in enumerate(request.file_keys)
            for uri, key in zip(uris, keys, strict=True)
        ]
    except StreamCryptError as exc:
        raise _error(session, "internal", message=f"the token did not wrap: {exc}") from None
    for index, stanza in stanzas:
        session.command("recipient-stanza", str(index), *stanza.args, body=stanza.body)


def _unwrap(session: _Session, request: UnwrapRequest, key_for: KeyFor) -> None:
    tags = {key_tag(uri): uri for uri in _uris(session, "identity", request.identities)}
    for file_index, stanzas in enumerate(request.files):
        ours = [(i, s) for i, s in enumerate(stanzas) if s.kind == STANZA_TYPE]
        for i, stanza in ours:
            if len(stanza.args) != 2 or not 0 < len(stanza.body) <= _MAX_WRAPPED:
                raise _error(
                    session, "stanza", str(file_index), str(i), message="malformed pkcs11 stanza"
                )
        for i, stanza in ours:
            uri = tags.get(stanza.args[1])
            if uri is None:
                continue
            try:
                key = key_for(uri, pin=_pin_for(session, uri))
            except StreamCryptError as exc:
                raise _error(session, "internal", message=f"no token key: {exc}") from None
            try:
                file_key = key.unwrap(stanza.body)
            except AuthenticationError:
                where = (str(file_index), str(i))
                raise _error(session, "stanza", *where, message="wrong key or tampered") from None
            except StreamCryptError as exc:
                raise _error(
                    session, "internal", message=f"the token did not unwrap: {exc}"
                ) from None
            session.command("file-key", str(file_index), body=file_key)
            break


def serve(
    machine: str,
    key_for: KeyFor = token_key,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Run one session of ``machine`` over ``stdin``/``stdout`` (the process's by
    default); raises :class:`PluginError` when the client leaves the protocol."""
    session = _Session(machine, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    request = session.next_event()
    try:
        if isinstance(request, WrapRequest):
            _wrap(session, request, key_for)
        elif isinstance(request, UnwrapRequest):
            _unwrap(session, request, key_for)
    except _Failed:
        try:  # age has hung up after the error; rage waits for 'done'
            session.done()
        except (OSError, PluginError):
            pass
        return
    session.done()


def main(argv: Sequence[str] | None = None, *, key_for: KeyFor = token_key) -> int:
    """The console script: ``--age-plugin=recipient-v1|identity-v1`` (run by age) or
    ``--identity URI`` (print the identity and recipient of a token key)."""
    parser = argparse.ArgumentParser(
        prog="age-plugin-pkcs11", description="age plugin for PKCS#11 token keys"
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--age-plugin", choices=("recipient-v1", "identity-v1"))
    group.add_argument("--identity", metavar="URI", help="print the identity for this key")
    args = parser.parse_args(argv)
    try:
        if args.identity is not None:
            sys.stdout.write(
                f"# recipient: {recipient_for(args.identity)}\n{identity_for(args.identity)}\n"
            )
            return 0
        serve(args.age_plugin, key_for)
    except StreamCryptError as exc:
        sys.stderr.write(f"age-plugin-pkcs11: {exc}\n")
        return 1
    return 0
