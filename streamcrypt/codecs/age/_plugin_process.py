"""age plugin recipients and identities, and the one adapter that runs a plugin.

A plugin recipient is Bech32 with the human-readable part ``age1`` + NAME
(``age1yubikey1...``), a plugin identity Bech32 with ``AGE-PLUGIN-`` + NAME + ``-``
(``AGE-PLUGIN-YUBIKEY-1...``); either is handled by the program ``age-plugin-NAME``
found on ``PATH`` (absolute entries only: never the working directory). Each
:meth:`PluginRecipient.wrap` and :meth:`PluginIdentity.unwrap` runs one session of the
sans-I/O machine (``_plugin.PluginClient``) against one process, as age does.

:func:`run_session` is the adapter: it starts the plugin in the temporary directory (so
it cannot depend on the caller's working directory), moves bytes between its pipes and
the machine with ``selectors`` (no thread), waits at most ``timeout`` seconds for each
answer, keeps at most 4 KiB of its standard error for the message, and kills and reaps
the process on every way out (success included, after a short grace to exit). It is
blocking; the age transforms call it from their header step, which the engine runs on
a worker thread. Everything a plugin does wrong is a :class:`PluginError`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING

from ...errors import FormatError, InvalidParameterError, PluginError
from ...keys import HoldsSecrets
from .._bech32 import bech32_decode, bech32_encode
from .._stanza import PublicKey, Recipient, Stanza
from ._plugin import PluginClient, PluginUI

if TYPE_CHECKING:  # the process modules are imported when a plugin runs (start-up)
    import selectors
    import subprocess

#: Seconds a plugin may take to answer (each exchange, not the whole session): long
#: enough for a token that asks for a touch.
DEFAULT_TIMEOUT = 60.0
#: Seconds a plugin that finished may take to exit before it is killed.
_EXIT_GRACE = 2.0
_STDERR_KEEP = 4096
_NAME = re.compile(r"[a-z0-9._+-]+")
_READ = 65536
#: The label sets of age's own stanza types (c2sp.org/age-plugin, labels): those of a
#: recipient that writes one, for encrypting and re-keying alike. Other types (a plugin's,
#: the grease age writes) carry the labels their plugin declared, which a reader of the
#: header does not know.
_KIND_LABELS: dict[str, frozenset[str]] = {
    "X25519": frozenset(),
    "ssh-ed25519": frozenset(),
    "ssh-rsa": frozenset(),
    "scrypt": frozenset(),
    "mlkem768x25519": frozenset({"postquantum"}),
}


def plugin_name(hrp: str, kind: str) -> str | None:
    """The plugin NAME of a Bech32 human-readable part (lowercase), or ``None`` when it is
    not a plugin's: ``age1NAME`` for ``kind="recipient"``, ``age-plugin-NAME-`` else."""
    if kind == "recipient":
        name = hrp[4:] if hrp.startswith("age1") else ""
    else:
        name = hrp[11:-1] if hrp.startswith("age-plugin-") and hrp.endswith("-") else ""
    return name if _NAME.fullmatch(name) else None


def plugin_path(name: str) -> str:
    """The program ``age-plugin-NAME`` on ``PATH``'s absolute entries; :class:`PluginError`
    when there is none."""
    import shutil  # here: only a plugin needs it (the command's start-up)

    entries = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(p)]
    program = f"age-plugin-{name}"
    found = shutil.which(program, path=os.pathsep.join(entries))
    if found is None:
        raise PluginError(f"age plugin {name!r} is not installed: no {program} on PATH")
    return found


def run_session(client: PluginClient, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Run ``client``'s session with its plugin until it finishes; :class:`PluginError`
    when the plugin is missing, fails, hangs (``timeout`` seconds without an answer),
    floods or leaves the protocol. The process is gone when this returns or raises."""
    import subprocess
    import tempfile

    argv = [plugin_path(client.name), f"--age-plugin={client.machine}"]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tempfile.gettempdir(),
        )
    except OSError as exc:
        raise PluginError(f"age plugin {client.name!r} did not start: {exc.strerror}") from None
    stderr = bytearray()
    finished = False
    try:
        _exchange(proc, client, timeout, stderr)
        finished = True
    except PluginError as exc:
        note = _quote_stderr(stderr)
        raise PluginError(f"{exc}{note}") from None
    finally:
        _stop(proc, graceful=finished)


def _exchange(
    proc: subprocess.Popen[bytes], client: PluginClient, timeout: float, stderr: bytearray
) -> None:
    import selectors

    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        pending = client.data_to_send()
        sel.register(proc.stdin, selectors.EVENT_WRITE)
        deadline = time.monotonic() + timeout
        while not client.finished:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PluginError(
                    f"age plugin {client.name!r} did not answer within {timeout:g} seconds"
                )
            for key, _ in sel.select(left):
                fd = key.fileobj
                if fd is proc.stdin:
                    pending = _write(sel, proc.stdin, pending)
                    continue
                try:
                    chunk = os.read(key.fd, _READ)
                except BlockingIOError:
                    continue
                if fd is proc.stderr:
                    stderr += chunk
                    del stderr[:-_STDERR_KEEP]
                    if not chunk:
                        sel.unregister(fd)
                    continue
                client.receive_data(chunk)  # b"": the plugin closed its output
                answer = client.data_to_send()
                if answer:  # an exchange completed: the next one has its own timeout
                    deadline = time.monotonic() + timeout
                    if not pending:
                        sel.register(proc.stdin, selectors.EVENT_WRITE)
                    pending += answer
                if client.finished:
                    break


def _write(sel: selectors.BaseSelector, stdin: IO[bytes], pending: bytes) -> bytes:
    """Write what the pipe takes of ``pending``; the rest. A plugin that closed its input
    gets nothing more (its end of output tells the machine what happened)."""
    fd = sel.get_key(stdin).fd
    try:
        pending = pending[os.write(fd, pending) :]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, ConnectionResetError):
        pending = b""
    if not pending:
        sel.unregister(stdin)
    return pending


def _stop(proc: subprocess.Popen[bytes], *, graceful: bool) -> None:
    """Close the pipes, give a plugin that finished ``_EXIT_GRACE`` to exit, kill it
    otherwise, and reap it."""
    import subprocess

    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
    if graceful:
        try:
            proc.wait(_EXIT_GRACE)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait()


def _quote_stderr(stderr: bytearray) -> str:
    lines = bytes(stderr).decode("utf-8", "replace").strip().splitlines()
    if not lines:
        return ""
    last = "".join(c if c.isprintable() else " " for c in lines[-1])[:200]
    return f" (its last error output: {last!r})"


# ---------------------------------------------------------------------------------------
# Recipients and identities
# ---------------------------------------------------------------------------------------


class PluginRecipient(PublicKey):
    """A plugin recipient (``age1NAME1...``): :meth:`wrap` runs ``age-plugin-NAME``.

    ``timeout`` bounds each answer of the plugin (seconds); ``ui`` answers its requests
    (by default every request is answered ``fail``). Raises :class:`FormatError` for text
    that is not a plugin recipient; :meth:`wrap` raises :class:`PluginError`.
    """

    __slots__ = ("_identity", "data", "name", "timeout", "ui")

    def __init__(
        self, text: str, *, timeout: float = DEFAULT_TIMEOUT, ui: PluginUI | None = None
    ) -> None:
        #: The plugin's name and the data the recipient carries for it.
        self.name, self.data = _parse(text, "recipient")
        self._public = text.encode()
        self._identity = False
        self.timeout = timeout
        self.ui = ui or PluginUI()

    def __str__(self) -> str:
        if self._identity:  # an identity's text is secret
            return f"<the identity of the age plugin {self.name!r}>"
        return self._public.decode()

    def wrap(self, file_key: bytes) -> list[Stanza]:
        """The stanzas the plugin wraps ``file_key`` into; :class:`PluginError`."""
        return self.wrap_with_labels(file_key)[0]

    def wrap_with_labels(self, file_key: bytes) -> tuple[list[Stanza], frozenset[str]]:
        """The stanzas and the label set the plugin gave them; :class:`PluginError`."""
        client = PluginClient.wrap(
            self.name, self._public.decode(), file_key, identity=self._identity, ui=self.ui
        )
        run_session(client, self.timeout)
        return client.stanzas, client.labels


class PluginIdentity(HoldsSecrets):
    """A plugin identity (``AGE-PLUGIN-NAME-1...``): :meth:`unwrap` runs
    ``age-plugin-NAME`` with every stanza of the header. ``timeout`` and ``ui`` as for
    :class:`PluginRecipient`. Raises :class:`FormatError` for text that is not a plugin
    identity; :meth:`unwrap` raises :class:`PluginError`. Its text is treated as secret."""

    __slots__ = ("_data", "_text", "name", "timeout", "ui")

    def __init__(
        self, text: str, *, timeout: float = DEFAULT_TIMEOUT, ui: PluginUI | None = None
    ) -> None:
        self.name, self._data = _parse(text, "identity")
        self._text = text
        self.timeout = timeout
        self.ui = ui or PluginUI()

    def unwrap(self, stanzas: Sequence[Stanza], /) -> bytes | None:
        """The file key if the plugin unwraps one from ``stanzas``, else ``None``."""
        client = PluginClient.unwrap(self.name, self._text, stanzas, ui=self.ui)
        run_session(client, self.timeout)
        return client.file_key

    @property
    def data(self) -> bytes:
        """The data the identity carries for its plugin (secret for some plugins)."""
        return self._data

    @property
    def recipient(self) -> PluginRecipient:
        """A recipient that wraps to this identity (the plugin is given the identity, as
        age's ``-e -i`` does)."""
        recipient = PluginRecipient.__new__(PluginRecipient)
        recipient.name, recipient._public, recipient._identity = (
            self.name,
            self._text.encode(),
            True,
        )
        recipient.timeout, recipient.ui = self.timeout, self.ui
        return recipient

    def __repr__(self) -> str:
        return f"PluginIdentity(<secret hidden>, plugin={self.name!r})"

    __str__ = __repr__


def _parse(text: str, kind: str) -> tuple[str, bytes]:
    hrp, data = bech32_decode(text)
    name = plugin_name(hrp, kind)
    if name is None:
        raise FormatError(f"not an age plugin {kind}")
    return name, data


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name.lower()):
        raise InvalidParameterError("an age plugin name is letters, digits and - _ . +")
    return name.lower()


def plugin_recipient(name: str, data: bytes) -> str:
    """The recipient ``age1NAME1...`` carrying ``data`` for plugin ``name``
    (:class:`InvalidParameterError` for a name the spec does not allow)."""
    return bech32_encode("age1" + _check_name(name), data)


def plugin_identity(name: str, data: bytes) -> str:
    """The identity ``AGE-PLUGIN-NAME-1...`` carrying ``data`` for plugin ``name``."""
    return bech32_encode(f"age-plugin-{_check_name(name)}-", data, upper=True)


def wrap_labelled(
    recipient: Recipient, file_key: bytes
) -> tuple[list[Stanza], list[frozenset[str]]]:
    """One recipient's stanzas for ``file_key`` and the label sets they carry: a plugin's
    the ``labels`` it declared; any other recipient's read from the types of the stanzas
    it wrote (:data:`_KIND_LABELS`; a type not age's own declares none), whatever its
    class."""
    if isinstance(recipient, PluginRecipient):
        stanzas, labels = recipient.wrap_with_labels(file_key)
        return stanzas, [labels]
    stanzas = recipient.wrap(file_key)
    return stanzas, [_KIND_LABELS.get(s.kind, frozenset()) for s in stanzas]


def labels_before_wrapping(recipient: Recipient) -> frozenset[str]:
    """The label set of a recipient that is not a plugin's, told before it wraps (to refuse
    a mix when the encryptor is made): that of the stanza type its class (or a base)
    names as ``kind``, else none. What it writes then decides (:func:`wrap_labelled`)."""
    kind = getattr(type(recipient), "kind", None)
    return _KIND_LABELS.get(kind, frozenset()) if isinstance(kind, str) else frozenset()


def check_labels(label_sets: Iterable[frozenset[str]]) -> None:
    """The one rule on who may share a file: :class:`InvalidParameterError` unless every
    label set is the same (encrypting and re-keying alike)."""
    if len(set(label_sets)) > 1:
        raise InvalidParameterError(
            "these recipients cannot share a file: their label sets differ "
            "(e.g. post-quantum recipients with classic ones: the file would be only as "
            "strong as the weakest)"
        )


def wrap_all(recipients: Iterable[Recipient], file_key: bytes) -> list[Stanza]:
    """Every recipient's stanzas for ``file_key``; refused unless all have the same label
    set (:func:`check_labels`)."""
    wrapped = [wrap_labelled(r, file_key) for r in recipients]
    check_labels(labels for _, sets in wrapped for labels in sets)
    return [stanza for stanzas, _ in wrapped for stanza in stanzas]
