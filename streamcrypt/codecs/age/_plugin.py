"""The age plugin protocol (c2sp.org/age-plugin): recipient-v1 and identity-v1, sans-I/O.

Theory of operation
-------------------
An age client runs ``age-plugin-NAME --age-plugin=recipient-v1`` to wrap a file key, or
``--age-plugin=identity-v1`` to unwrap one, and talks to it over the plugin's standard
input and output in age header stanzas (``-> command args...`` then a base64 body in
64-column lines ending with a shorter one: the age header's own framing,
``_header._read_stanza`` / ``_header._encode_stanza``). A session has two phases:

1. the client sends its commands, then ``done`` (recipient-v1: ``add-recipient`` /
   ``add-identity``, ``wrap-file-key``, ``extension-labels``; identity-v1:
   ``add-identity``, ``recipient-stanza FILE_INDEX type args...``); the plugin ignores
   commands it does not know (grease);
2. the plugin sends commands one at a time, each answered (``ok`` / ``fail``) before the
   next: ``msg``, ``request-secret``, ``request-public``, ``confirm``, the results
   (``recipient-stanza`` and ``labels``, or ``file-key``) and ``error``; then ``done``.
   The client answers a command it does not know with ``unsupported``.

:class:`PluginClient` is the client's side (what age does) and :class:`PluginServer` the
plugin's (what a plugin streamcrypt ships does). Both are h11-style machines: bytes in with
``receive_data`` (``b""`` for the end of input), bytes out with ``data_to_send``; they know
nothing of processes (``_plugin_process`` runs a plugin). Input is bounded: a command line
of at most :data:`MAX_LINE` bytes, at most :data:`MAX_INPUT` bytes per session. Anything
malformed, over a cap or out of turn raises :class:`PluginError` and leaves the machine
broken (later calls raise the first failure again).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal, TypeAlias

from ...errors import FormatError, PluginError
from ...keys import HoldsSecrets
from .._stanza import Stanza, b64decode
from ._header import FILE_KEY_SIZE, _encode_stanza, _read_stanza

#: The two state machines of the protocol.
Machine: TypeAlias = Literal["recipient-v1", "identity-v1"]
#: Longest command line (``-> ...``) either side accepts; long enough for the longest
#: plugin recipients seen (a few thousand characters).
MAX_LINE = 64 << 10
#: Most bytes either side reads in one session; a plugin that sends more is flooding.
MAX_INPUT = 1 << 20
#: Longest text from the plugin (a message, an error) quoted in an exception.
_MAX_QUOTE = 300
_COLUMNS = 64
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")
_DONE = Stanza(("done",), b"")


class _State(Enum):
    PHASE1 = "phase 1"
    PHASE2 = "phase 2"
    DONE = "done"
    BROKEN = "broken"


def _quote(body: bytes) -> str:
    """Text from the plugin, made printable and cut short, for an exception message."""
    text = body.decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else " " for c in text).strip()
    return text if len(text) <= _MAX_QUOTE else text[:_MAX_QUOTE] + "..."


def _index(text: str, what: str) -> int:
    if not _INDEX.fullmatch(text):
        raise PluginError(f"age plugin protocol: {what} {text[:20]!r} is not a decimal index")
    return int(text)


def _command(command: str, *args: str, body: bytes = b"") -> Stanza:
    try:
        return Stanza((command, *args), body)
    except FormatError as exc:
        raise PluginError(f"age plugin protocol: cannot send {command!r}: {exc}") from None


class _StanzaReader:
    """Stanzas from bytes that arrive in pieces, each line checked as it completes (a
    command line up to :data:`MAX_LINE`, a body line up to 64 columns) and the session's
    input capped at ``MAX_INPUT``; the stanza itself is read by ``_header._read_stanza``."""

    __slots__ = ("_buf", "_lines", "_searched", "_total")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._lines: list[bytes] = []  # the stanza so far: its command line, body lines
        self._searched = 0
        self._total = 0

    def feed(self, data: bytes) -> list[Stanza]:
        self._total += len(data)
        if self._total > MAX_INPUT:
            raise PluginError(f"age plugin protocol: more than {MAX_INPUT} bytes in one session")
        self._buf += data
        out: list[Stanza] = []
        start = 0
        while (end := self._buf.find(b"\n", max(start, self._searched))) >= 0:
            self._line(bytes(self._buf[start:end]), out)
            start = self._searched = end + 1
        del self._buf[:start]
        self._searched = len(self._buf)
        self._check_length(len(self._buf))
        return out

    @property
    def idle(self) -> bool:
        """No part of a stanza is waiting for more bytes."""
        return not self._buf and not self._lines

    def _check_length(self, size: int) -> None:
        if not self._lines and size > MAX_LINE:
            raise PluginError(f"age plugin protocol: a command line is longer than {MAX_LINE}")
        if self._lines and size > _COLUMNS:
            raise PluginError("age plugin protocol: a body line is longer than 64 columns")

    def _line(self, line: bytes, out: list[Stanza]) -> None:
        self._check_length(len(line))
        if not self._lines and not line.startswith(b"-> "):
            raise PluginError("age plugin protocol: expected a command ('-> ...') line")
        self._lines.append(line)
        if len(self._lines) > 1 and len(line) < _COLUMNS:
            lines, self._lines = self._lines, []
            try:
                stanza, _ = _read_stanza(lines, 0, len(lines))
            except FormatError as exc:
                raise PluginError(f"age plugin protocol: malformed stanza: {exc}") from None
            out.append(stanza)


class _Machine:
    """What both sides share: the reader, the outgoing bytes, the state and its failure."""

    __slots__ = ("_failure", "_out", "_reader", "_state", "machine")

    def __init__(self, machine: Machine) -> None:
        if machine not in ("recipient-v1", "identity-v1"):
            raise PluginError(f"unknown age plugin state machine {machine!r}")
        self.machine: Machine = machine
        self._reader = _StanzaReader()
        self._out = bytearray()
        self._state = _State.PHASE1
        self._failure: PluginError | None = None

    def _send(self, stanza: Stanza) -> None:
        self._out += _encode_stanza(stanza)

    def data_to_send(self) -> bytes:
        """The bytes to write to the other side now (``b""`` when there are none)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def finished(self) -> bool:
        """Both phases are over (the plugin sent ``done`` in phase 2)."""
        return self._state is _State.DONE

    def receive_data(self, data: bytes) -> None:
        """Take bytes the other side wrote; ``b""``: it closed its end. Raises
        :class:`PluginError` (and the machine is broken) for anything out of protocol."""
        if self._failure is not None:
            raise PluginError(f"the age plugin session already failed: {self._failure}")
        try:
            if self._state is _State.DONE:
                if data:
                    raise PluginError("age plugin protocol: data after the final 'done'")
                return
            if not data:
                self._end()
                return
            for stanza in self._reader.feed(data):
                if self.finished:  # (a method: the state changed in _handle)
                    raise PluginError("age plugin protocol: data after the final 'done'")
                self._handle(stanza)
            if self.finished and not self._reader.idle:
                raise PluginError("age plugin protocol: data after the final 'done'")
        except PluginError as exc:
            self._state = _State.BROKEN
            self._failure = exc
            raise

    def _end(self) -> None:
        raise NotImplementedError

    def _handle(self, stanza: Stanza) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
# The client (age's side)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PluginUI:
    """How a client answers a plugin's requests (non-interactive by default).

    Each callback left ``None``, or returning ``None``, is answered ``fail``:
    ``message(text)`` shows a message; ``request_secret(prompt)`` /
    ``request_public(prompt)`` return the value asked for; ``confirm(prompt, yes, no)``
    returns whether the user chose ``yes`` (``no`` may be ``None``).
    """

    message: Callable[[str], object] | None = None
    request_secret: Callable[[str], str | None] | None = None
    request_public: Callable[[str], str | None] | None = None
    confirm: Callable[[str, str, str | None], bool | None] | None = None


class PluginClient(_Machine):
    """The client's side of one session with plugin ``name``: wraps one file key
    (:meth:`wrap`) or unwraps the file key of one header (:meth:`unwrap`).

    The phase-1 commands are ready in :meth:`data_to_send` at once. Once
    :attr:`finished`: :attr:`stanzas` and :attr:`labels` (recipient-v1) or :attr:`file_key`
    (identity-v1, ``None`` when no stanza was the plugin's). Raises :class:`PluginError`
    for anything out of protocol and for an ``error`` the plugin sends (quoting it).
    """

    __slots__ = ("_labels_seen", "file_key", "labels", "name", "stanzas", "ui")

    def __init__(self, name: str, machine: Machine, commands: Sequence[Stanza], ui: PluginUI):
        super().__init__(machine)
        self.name = name
        self.ui = ui
        self.stanzas: list[Stanza] = []
        self.labels: frozenset[str] = frozenset()
        self._labels_seen = False
        self.file_key: bytes | None = None
        for command in (*commands, _DONE):
            self._send(command)
        self._state = _State.PHASE2

    @classmethod
    def wrap(
        cls, name: str, key: str, file_key: bytes, *, identity: bool = False, ui: PluginUI
    ) -> PluginClient:
        """A recipient-v1 session wrapping ``file_key`` to ``key`` (a recipient, or an
        identity when ``identity``)."""
        add = "add-identity" if identity else "add-recipient"
        commands = [
            _command(add, key),
            _command("wrap-file-key", body=file_key),
            _command("extension-labels"),
        ]
        return cls(name, "recipient-v1", commands, ui)

    @classmethod
    def unwrap(
        cls, name: str, identity: str, stanzas: Sequence[Stanza], *, ui: PluginUI
    ) -> PluginClient:
        """An identity-v1 session offering ``identity`` every stanza of one header."""
        commands = [_command("add-identity", identity)]
        commands += [_command("recipient-stanza", "0", *s.args, body=s.body) for s in stanzas]
        return cls(name, "identity-v1", commands, ui)

    def _fail(self, what: str) -> PluginError:
        return PluginError(f"age plugin {self.name!r} {what}")

    def _end(self) -> None:
        raise self._fail("exited (closed its output) before finishing the protocol")

    def _handle(self, stanza: Stanza) -> None:
        command, args, body = stanza.kind, stanza.args[1:], stanza.body
        if command == "done":
            if args:
                raise self._fail("sent 'done' with arguments")
            if self.machine == "recipient-v1" and not self.stanzas:
                raise self._fail("sent no recipient stanza")
            self._state = _State.DONE
            return
        if command == "error":
            self._send(_command("ok"))
            raise self._fail(f"failed ({' '.join(args)[:40]}): {_quote(body)}")
        handler = _CLIENT_COMMANDS[self.machine].get(command)
        if handler is None:
            self._send(_command("unsupported"))
        else:
            handler(self, args, body)

    def _recipient_stanza(self, args: tuple[str, ...], body: bytes) -> None:
        if len(args) < 2 or _index(args[0], "file index") != 0:
            raise self._fail("sent a recipient-stanza for a file it was not given")
        self.stanzas.append(_stanza_or_fail(args[1:], body))
        self._send(_command("ok"))

    def _labels(self, args: tuple[str, ...], body: bytes) -> None:
        if self._labels_seen or len(set(args)) != len(args):
            raise self._fail("sent 'labels' twice or with a label twice")
        self._labels_seen = True
        self.labels = frozenset(args)
        self._send(_command("ok"))

    def _file_key(self, args: tuple[str, ...], body: bytes) -> None:
        if len(args) != 1 or _index(args[0], "file index") != 0:
            raise self._fail("sent a file-key for a file it was not given")
        if self.file_key is not None:
            raise self._fail("sent a second file-key for the file")
        if len(body) != FILE_KEY_SIZE:
            raise self._fail(f"sent a file key that is not {FILE_KEY_SIZE} bytes")
        self.file_key = body
        self._send(_command("ok"))

    def _message(self, args: tuple[str, ...], body: bytes) -> None:
        show = self.ui.message
        if show is not None:
            show(_quote(body))
        self._send(_command("ok" if show is not None else "fail"))

    def _request(self, callback: Callable[[str], str | None] | None, body: bytes) -> None:
        value = callback(_quote(body)) if callback is not None else None
        reply = _command("fail") if value is None else _command("ok", body=value.encode())
        self._send(reply)

    def _request_secret(self, args: tuple[str, ...], body: bytes) -> None:
        self._request(self.ui.request_secret, body)

    def _request_public(self, args: tuple[str, ...], body: bytes) -> None:
        self._request(self.ui.request_public, body)

    def _confirm(self, args: tuple[str, ...], body: bytes) -> None:
        if len(args) not in (1, 2):
            raise self._fail("sent 'confirm' without one or two choices")
        try:
            yes, *no = (b64decode(a.encode(), "confirm choice").decode() for a in args)
        except (FormatError, UnicodeDecodeError):
            raise self._fail("sent a 'confirm' choice that is not base64 of UTF-8") from None
        confirm = self.ui.confirm
        chose = confirm(_quote(body), yes, no[0] if no else None) if confirm else None
        self._send(_command("fail") if chose is None else _command("ok", "yes" if chose else "no"))


def _stanza_or_fail(args: Sequence[str], body: bytes) -> Stanza:
    try:
        return Stanza(tuple(args), body)
    except FormatError as exc:
        raise PluginError(f"age plugin protocol: malformed stanza: {exc}") from None


_Handler: TypeAlias = Callable[[PluginClient, tuple[str, ...], bytes], None]
_UI_COMMANDS: dict[str, _Handler] = {
    "msg": PluginClient._message,
    "request-secret": PluginClient._request_secret,
    "request-public": PluginClient._request_public,
    "confirm": PluginClient._confirm,
}
#: Phase 2 commands the client knows, by state machine (``done`` and ``error`` aside).
_CLIENT_COMMANDS: dict[Machine, dict[str, _Handler]] = {
    "recipient-v1": {
        **_UI_COMMANDS,
        "recipient-stanza": PluginClient._recipient_stanza,
        "labels": PluginClient._labels,
    },
    "identity-v1": {**_UI_COMMANDS, "file-key": PluginClient._file_key},
}


# ---------------------------------------------------------------------------------------
# The plugin's side
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WrapRequest(HoldsSecrets):
    """recipient-v1's phase 1, complete: what to wrap to and the file keys (by index)."""

    recipients: tuple[str, ...] = field(repr=False)
    identities: tuple[str, ...] = field(repr=False)
    file_keys: tuple[bytes, ...] = field(repr=False)
    #: The client accepts a ``labels`` command.
    labels: bool = False


@dataclass(frozen=True, slots=True)
class UnwrapRequest(HoldsSecrets):
    """identity-v1's phase 1, complete: the identities and each file's stanzas (by index)."""

    identities: tuple[str, ...] = field(repr=False)
    files: tuple[tuple[Stanza, ...], ...]


@dataclass(frozen=True, slots=True)
class PluginReply:
    """The client's answer to the last command: ``ok`` (with its arguments and body),
    ``fail`` or ``unsupported`` (both ``ok=False``)."""

    ok: bool
    args: tuple[str, ...] = ()
    body: bytes = field(default=b"", repr=False)


Event: TypeAlias = WrapRequest | UnwrapRequest | PluginReply


class PluginServer(_Machine):
    """The plugin's side of one session: :meth:`next_event` gives the phase-1 request
    (:class:`WrapRequest` / :class:`UnwrapRequest`) once the client's ``done`` came, then
    a :class:`PluginReply` to each command sent with :meth:`send`; :meth:`done` ends the session.
    Raises :class:`PluginError` for anything out of protocol, and for a command sent
    before the phase-1 request was read or while the last one waits for its reply."""

    __slots__ = (
        "_awaiting",
        "_events",
        "_file_keys",
        "_files",
        "_identities",
        "_labels",
        "_recipients",
    )

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine)
        self._events: list[Event] = []
        self._awaiting = False
        self._recipients: list[str] = []
        self._identities: list[str] = []
        self._file_keys: list[bytes] = []
        self._files: list[list[Stanza]] = []
        self._labels = False

    def next_event(self) -> Event | None:
        """The next event, or ``None`` until more data comes."""
        return self._events.pop(0) if self._events else None

    def send(self, command: str, *args: str, body: bytes = b"") -> None:
        """Send a phase-2 command; its :class:`PluginReply` comes as an event before the next."""
        if self._state is not _State.PHASE2 or self._events:
            raise PluginError("age plugin protocol: read the request before answering it")
        if self._awaiting:
            raise PluginError(f"age plugin protocol: {command!r} sent before the last reply")
        self._send(_command(command, *args, body=body))
        self._awaiting = True

    def done(self) -> None:
        """End phase 2 (and the session)."""
        if self._state is not _State.PHASE2 or self._awaiting or self._events:
            raise PluginError("age plugin protocol: 'done' before the last reply was read")
        self._send(_DONE)
        self._state = _State.DONE

    def _end(self) -> None:
        if self._state is _State.PHASE1 or self._awaiting:
            raise PluginError("age plugin protocol: the client closed the session early")

    def _handle(self, stanza: Stanza) -> None:
        if self._state is _State.PHASE2:
            self._reply(stanza)
            return
        command, args = stanza.kind, stanza.args[1:]
        if command == "done":
            self._phase1_done(args)
        elif command == "add-identity":
            self._identities.append(_one_arg(args, command))
        elif self.machine == "identity-v1" and command == "recipient-stanza":
            self._recipient_stanza(args, stanza.body)
        elif self.machine == "recipient-v1" and command == "add-recipient":
            self._recipients.append(_one_arg(args, command))
        elif self.machine == "recipient-v1" and command == "wrap-file-key":
            if args or len(stanza.body) != FILE_KEY_SIZE:
                raise PluginError("age plugin protocol: wrap-file-key takes a 16-byte file key")
            self._file_keys.append(stanza.body)
        elif self.machine == "recipient-v1" and command == "extension-labels":
            self._labels = True
        # any other command is grease (or from a later version): ignored, as the spec says

    def _recipient_stanza(self, args: tuple[str, ...], body: bytes) -> None:
        if len(args) < 2:
            raise PluginError("age plugin protocol: recipient-stanza without a stanza")
        index = _index(args[0], "file index")
        if index not in (len(self._files) - 1, len(self._files)):
            raise PluginError("age plugin protocol: file indices must count up from 0")
        if index == len(self._files):
            self._files.append([])
        self._files[index].append(_stanza_or_fail(args[1:], body))

    def _phase1_done(self, args: tuple[str, ...]) -> None:
        if args:
            raise PluginError("age plugin protocol: 'done' takes no arguments")
        self._state = _State.PHASE2
        if self.machine == "recipient-v1":
            request: Event = WrapRequest(
                tuple(self._recipients),
                tuple(self._identities),
                tuple(self._file_keys),
                self._labels,
            )
        else:
            request = UnwrapRequest(tuple(self._identities), tuple(tuple(f) for f in self._files))
        self._events.append(request)

    def _reply(self, stanza: Stanza) -> None:
        if not self._awaiting:
            raise PluginError(f"age plugin protocol: {stanza.kind!r} when no reply was due")
        if stanza.kind not in ("ok", "fail", "unsupported"):
            raise PluginError(f"age plugin protocol: {stanza.kind[:40]!r} is not a reply")
        self._awaiting = False
        self._events.append(PluginReply(stanza.kind == "ok", stanza.args[1:], stanza.body))


def _one_arg(args: tuple[str, ...], command: str) -> str:
    if len(args) != 1:
        raise PluginError(f"age plugin protocol: {command} takes one argument")
    return args[0]
