"""The age plugin protocol: streamcrypt's client and its age-plugin-pkcs11 against the Go
``age`` binary both ways, against each other, and against misbehaving plugins; the
sans-I/O machines message by message and in any chunking."""

from __future__ import annotations

import io
import itertools
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamcrypt
from streamcrypt.cli._age_plugin_pkcs11 import identity_for, key_tag, recipient_for, serve
from streamcrypt.codecs import age
from streamcrypt.codecs._bech32 import bech32_encode
from streamcrypt.codecs._stanza import Stanza, b64encode
from streamcrypt.codecs.age._header import _encode_stanza
from streamcrypt.codecs.age._plugin import (
    MAX_INPUT,
    PluginClient,
    PluginReply,
    PluginServer,
    PluginUI,
    UnwrapRequest,
    WrapRequest,
)
from streamcrypt.errors import FormatError, InvalidParameterError, PluginError

sys.path.insert(0, str(Path(__file__).parent))
import soft_pkcs11

URI = "pkcs11:token=soft;object=file-key-1"
OTHER_URI = "pkcs11:token=soft;object=file-key-2"
PIN_URI = "pkcs11:token=soft;object=pinned;id=pin"
MESSAGE = b"age plugin round trip\n" * 3000
AGE = shutil.which("age")
needs_age = pytest.mark.skipif(AGE is None, reason="the Go age binary is not installed")
FILE_KEY = bytes(range(16))


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on PATH holding age-plugin-pkcs11 (with the software token key), and
    an empty temporary directory the test checks is left empty."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    soft_pkcs11.write_plugin(str(bin_dir))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    yield bin_dir
    assert list(temp.iterdir()) == [], "a plugin session left temporaries"


def _age(*args: str, data: bytes = b"") -> bytes:
    assert AGE is not None
    done = subprocess.run([AGE, *args], input=data, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --------------------------------------------------------------------------- interop


@needs_age
def test_go_age_encrypts_to_the_plugin_and_streamcrypt_decrypts(plugins: Path) -> None:
    ciphertext = _age("-r", recipient_for(URI), data=MESSAGE)
    assert b"\n-> pkcs11 " + key_tag(URI).encode() + b"\n" in ciphertext
    out = streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity_for(URI))
    assert out == MESSAGE
    line = ciphertext.index(b"\n", ciphertext.index(b"-> pkcs11 ")) + 1  # the wrapped key
    flipped = b"B" if ciphertext[line : line + 1] != b"B" else b"C"
    tampered = ciphertext[:line] + flipped + ciphertext[line + 1 :]
    with pytest.raises(PluginError, match="wrong key or tampered"):
        streamcrypt.decrypt_bytes(tampered, format="age", identities=identity_for(URI))


@needs_age
def test_streamcrypt_encrypts_to_the_plugin_and_go_age_decrypts(
    plugins: Path, tmp_path: Path
) -> None:
    ciphertext = streamcrypt.encrypt_bytes(MESSAGE, format="age", recipients=recipient_for(URI))
    identity = tmp_path / "identity.txt"
    identity.write_text(f"# a token key\n{identity_for(URI)}\n")
    assert _age("-d", "-i", str(identity), data=ciphertext) == MESSAGE


@needs_age
def test_go_age_and_streamcrypt_through_the_plugin_with_a_softhsm2_token_key(
    softhsm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The installed plugin's own key (streamcrypt.keys.Pkcs11Key in a SoftHSM2 token,
    not the software stand-in), both ways with Go age; the key stays in the token."""
    from streamcrypt.keys import Pkcs11Key

    monkeypatch.setenv("SC_TEST_AGE_TOKEN_PIN", softhsm.pin)
    uri = softhsm.uri("age-plugin-key", pin_env="SC_TEST_AGE_TOKEN_PIN")
    Pkcs11Key.generate(uri, pin=softhsm.pin_source)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "age-plugin-pkcs11"
    repo = Path(__file__).resolve().parent.parent
    plugin.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(repo)!r})\n"
        "from streamcrypt.cli._age_plugin_pkcs11 import main\nsys.exit(main())\n"
    )
    plugin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    from_go = _age("-r", recipient_for(uri), data=MESSAGE)
    assert b"\n-> pkcs11 " in from_go
    assert streamcrypt.decrypt_bytes(from_go, format="age", identities=identity_for(uri)) == MESSAGE
    ours = streamcrypt.encrypt_bytes(MESSAGE, format="age", recipients=recipient_for(uri))
    identity = tmp_path / "identity.txt"
    identity.write_text(identity_for(uri) + "\n")
    identity.chmod(0o600)
    assert _age("-d", "-i", str(identity), data=ours) == MESSAGE
    other = softhsm.uri("age-plugin-other", pin_env="SC_TEST_AGE_TOKEN_PIN")
    Pkcs11Key.generate(other, pin=softhsm.pin_source)
    with pytest.raises((PluginError, streamcrypt.errors.UnknownKeyError)):
        streamcrypt.decrypt_bytes(from_go, format="age", identities=identity_for(other))


@needs_age
def test_go_age_refuses_a_file_for_another_token_key(plugins: Path, tmp_path: Path) -> None:
    ciphertext = streamcrypt.encrypt_bytes(MESSAGE, format="age", recipients=recipient_for(URI))
    identity = tmp_path / "identity.txt"
    identity.write_text(identity_for(OTHER_URI) + "\n")
    done = subprocess.run(
        [AGE or "age", "-d", "-i", str(identity)], input=ciphertext, capture_output=True, timeout=60
    )
    assert done.returncode != 0 and done.stdout == b""


@needs_age
def test_go_age_with_a_token_that_needs_a_pin_from_the_environment(
    plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    identity = tmp_path / "identity.txt"
    identity.write_text(identity_for(PIN_URI) + "\n")
    monkeypatch.setenv("AGE_PLUGIN_PKCS11_PIN", soft_pkcs11.PIN)
    ciphertext = _age("-r", recipient_for(PIN_URI), data=b"pinned")
    assert _age("-d", "-i", str(identity), data=ciphertext) == b"pinned"
    monkeypatch.setenv("AGE_PLUGIN_PKCS11_PIN", "0000")
    done = subprocess.run(
        [AGE or "age", "-d", "-i", str(identity)], input=ciphertext, capture_output=True, timeout=60
    )
    assert done.returncode != 0 and b"the token refused the PIN" in done.stderr


def test_streamcrypt_client_with_its_own_plugin(plugins: Path) -> None:
    x25519 = age.X25519Identity.generate()
    recipients = [recipient_for(URI), recipient_for(OTHER_URI), x25519.recipient]
    ciphertext = streamcrypt.encrypt_bytes(MESSAGE, format="age", recipients=recipients)
    header = age.parse_header(ciphertext)
    assert header is not None
    assert [s.args for s in header.stanzas][:2] == [
        ("pkcs11", key_tag(URI)),
        ("pkcs11", key_tag(OTHER_URI)),
    ]
    for identity in (identity_for(OTHER_URI), x25519):
        assert streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity) == MESSAGE
    with pytest.raises(streamcrypt.errors.UnknownKeyError):
        streamcrypt.decrypt_bytes(
            ciphertext, format="age", identities=identity_for("pkcs11:token=soft;object=x")
        )


def test_a_plugin_identity_encrypts_as_age_e_i_does(plugins: Path) -> None:
    identity = age.parse_identity(identity_for(URI))
    ciphertext = streamcrypt.encrypt_bytes(b"x", format="age", recipients=identity.recipient)
    assert streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity) == b"x"
    assert identity_for(URI) not in repr(identity.recipient) + str(identity.recipient)


def test_the_pin_comes_from_request_secret_only_when_the_caller_answers(plugins: Path) -> None:
    ciphertext = streamcrypt.encrypt_bytes(
        b"pinned",
        format="age",
        recipients=age.PluginRecipient(
            recipient_for(PIN_URI), ui=PluginUI(request_secret=lambda prompt: "1234")
        ),
    )
    asked: list[str] = []

    def pin(prompt: str) -> str:
        asked.append(prompt)
        return soft_pkcs11.PIN

    identity = age.PluginIdentity(identity_for(PIN_URI), ui=PluginUI(request_secret=pin))
    assert streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity) == b"pinned"
    assert asked == ["PIN for the PKCS#11 token"]
    with pytest.raises(PluginError, match="no PIN for the PKCS#11 token"):  # non-interactive
        streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity_for(PIN_URI))


def test_plugin_keys_parse_into_the_one_recipient_model() -> None:
    recipient = age.parse_recipient(recipient_for(URI))
    identity = age.parse_identity(identity_for(URI))
    assert isinstance(recipient, age.PluginRecipient) and recipient.name == "pkcs11"
    assert isinstance(identity, age.PluginIdentity) and identity.name == "pkcs11"
    assert (
        recipient
        == age.parse_recipient(recipient_for(URI))
        != age.parse_recipient(recipient_for(OTHER_URI))
    )
    assert str(recipient) == recipient_for(URI)
    assert identity_for(URI) not in repr(identity) + str(identity)
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(identity)
    # Go age's test plugin keys (cmd/age/testdata/plugin.txt)
    assert age.parse_recipient("age1test10qdmzv9q").name == "test"  # type: ignore[union-attr]
    assert age.parse_identity("AGE-PLUGIN-TEST-10Q32NLXM").name == "test"  # type: ignore[union-attr]
    for bad in (bech32_encode("age1", b"x"), bech32_encode("age1a/b", b"x")):
        with pytest.raises(FormatError):
            age.parse_recipient(bad)
    with pytest.raises(FormatError):
        age.parse_identity(bech32_encode("AGE-PLUGIN-X", b"", upper=True))  # no final "-"


def test_a_missing_plugin_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PluginError, match="no age-plugin-pkcs11 on PATH"):
        streamcrypt.encrypt_bytes(b"x", format="age", recipients=recipient_for(URI))


def test_the_working_directory_is_never_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    soft_pkcs11.write_plugin(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f".{os.pathsep}bin")
    with pytest.raises(PluginError, match="not installed"):
        streamcrypt.encrypt_bytes(b"x", format="age", recipients=recipient_for(URI))


# ---------------------------------------------------------------- misbehaving plugins

_FAKE_PRELUDE = """\
#!{python}
import os, sys, time
open({pidfile!r}, "w").write(str(os.getpid()))
out = sys.stdout.buffer
def read_phase1():
    data = b""
    while not data.endswith(b"-> done\\n\\n"):
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data += chunk
    return data
"""

FAKES = {
    "hangs": ("read_phase1(); time.sleep(60)", "did not answer within 1 seconds"),
    "hangs-unread": ("time.sleep(60)", "did not answer within 1 seconds"),
    "trickles": (
        "read_phase1()\nfor _ in range(600):\n    out.write(b'x'); out.flush(); time.sleep(0.05)",
        "did not answer within 1 seconds",
    ),
    "floods": (
        "read_phase1(); out.write(b'-> msg\\n')\nwhile True: out.write(b'A' * 64 + b'\\n')",
        f"more than {MAX_INPUT} bytes",
    ),
    "floods-a-line": (
        "read_phase1()\nwhile True: out.write(b'-> ' + b'x' * 65536)",
        "command line is longer",
    ),
    "floods-stderr": (
        "read_phase1()\nwhile True: sys.stderr.write('noise ' * 1000)",
        "did not answer within 1 seconds",
    ),
    "exits": (
        "sys.stderr.write('the token is unplugged\\n'); sys.exit(3)",
        "exited .*the token is unplugged",
    ),
    "garbage": ("read_phase1(); out.write(b'hello\\n'); out.flush(); time.sleep(60)", "expected a"),
    "wrong-index": (
        "read_phase1(); out.write(b'-> file-key 1\\nAAAAAAAAAAAAAAAAAAAAAA\\n-> recipient-stanza 1 "
        "x\\nAAAAAAAAAAAAAAAAAAAAAA\\n'); out.flush(); time.sleep(60)",
        "not given",
    ),
    "reports-an-error": (
        "read_phase1(); out.write(b'-> error internal\\n"
        + b64encode(b"the token said no").decode()
        + "\\n'); out.flush(); sys.stdin.read(); time.sleep(60)",
        "the token said no",
    ),
    "done-with-nothing": (
        "read_phase1(); out.write(b'-> done\\n\\n'); out.flush()",
        "sent no recipient stanza",
    ),
}


def _fake(bin_dir: Path, name: str, body: str) -> Path:
    pidfile = bin_dir / f"{name}.pid"
    script = bin_dir / f"age-plugin-{name}"
    script.write_text(
        _FAKE_PRELUDE.format(python=sys.executable, pidfile=str(pidfile)) + textwrap.dedent(body)
    )
    script.chmod(0o755)
    return pidfile


def _gone(pidfile: Path) -> bool:
    """The process that wrote ``pidfile`` is gone and reaped (a zombie still answers)."""
    try:
        os.kill(int(pidfile.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("direction", ["encrypt", "decrypt"])
@pytest.mark.parametrize("name", list(FAKES))
def test_a_misbehaving_plugin_gets_a_typed_error_in_time_and_is_gone(
    plugins: Path, name: str, direction: str
) -> None:
    body, message = FAKES[name]
    if direction == "decrypt" and name == "done-with-nothing":
        message = "no identity matched"  # an identity-v1 plugin may find nothing
    pidfile = _fake(plugins, name, body)
    started = time.monotonic()
    with pytest.raises(streamcrypt.errors.StreamCryptError, match=message) as caught:
        if direction == "encrypt":
            recipient = age.PluginRecipient(bech32_encode(f"age1{name}", b"key"), timeout=1.0)
            streamcrypt.encrypt_bytes(b"x", format="age", recipients=recipient)
        else:
            x25519 = age.X25519Identity.generate()
            ciphertext = streamcrypt.encrypt_bytes(b"x", format="age", recipients=x25519.recipient)
            identity = age.PluginIdentity(
                bech32_encode(f"AGE-PLUGIN-{name.upper()}-", b"", upper=True), timeout=1.0
            )
            streamcrypt.decrypt_bytes(ciphertext, format="age", identities=identity)
    elapsed = time.monotonic() - started
    assert type(caught.value).__name__ in ("PluginError", "UnknownKeyError")
    assert elapsed < 6, f"{name} took {elapsed:.1f} s"
    assert _gone(pidfile), f"the {name} plugin is still running or not reaped"


def test_a_failing_plugin_identity_does_not_hide_one_that_opens(plugins: Path) -> None:
    """identity-v1 failures are set aside while another identity opens (the spec's MAY)."""
    pidfile = _fake(plugins, "exits", FAKES["exits"][0])
    x25519 = age.X25519Identity.generate()
    ciphertext = streamcrypt.encrypt_bytes(b"x", format="age", recipients=x25519.recipient)
    broken = age.PluginIdentity(bech32_encode("AGE-PLUGIN-EXITS-", b"", upper=True))
    out = streamcrypt.decrypt_bytes(ciphertext, format="age", identities=[broken, x25519])
    assert out == b"x" and _gone(pidfile)


def test_label_sets_must_agree(plugins: Path) -> None:
    body = (
        "read_phase1()\n"
        "out.write(b'-> labels postquantum\\n\\n'); out.flush(); os.read(0, 100)\n"
        "out.write(b'-> recipient-stanza 0 pq-ish\\nAAAA\\n'); out.flush(); os.read(0, 100)\n"
        "out.write(b'-> done\\n\\n'); out.flush()\n"
    )
    _fake(plugins, "pq", body)  # age1pq1 is age's own post-quantum type: use another name
    _fake(plugins, "labelled", body)
    labelled = age.PluginRecipient(bech32_encode("age1labelled", b"k"), timeout=5)
    classic = age.X25519Identity.generate().recipient
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        streamcrypt.encrypt_bytes(b"x", format="age", recipients=[labelled, classic])
    header = age.parse_header(streamcrypt.encrypt_bytes(b"x", format="age", recipients=labelled))
    assert header is not None and header.stanzas[0].args == ("pq-ish",)
    # a post-quantum plugin goes with age's own post-quantum recipients, a classic one not
    pq = age.MLKEM768X25519Identity.generate()
    both = streamcrypt.encrypt_bytes(b"pq", format="age", recipients=[labelled, pq.recipient])
    assert streamcrypt.decrypt_bytes(both, format="age", identities=pq) == b"pq"
    classic_plugin = age.parse_recipient(recipient_for(URI))
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        streamcrypt.encrypt_bytes(b"x", format="age", recipients=[classic_plugin, pq.recipient])


# ------------------------------------------------------------------ the state machines


def _stanzas(*stanzas: Stanza) -> bytes:
    return b"".join(_encode_stanza(s) for s in stanzas)


def _ui() -> PluginUI:
    return PluginUI(
        message=lambda text: None,
        request_secret=lambda prompt: "s3cret",
        confirm=lambda prompt, yes, no: True,
    )


UNWRAP_TRANSCRIPT = _stanzas(
    Stanza(("msg",), b"touch the token"),
    Stanza(("grease-x", "a", "b"), b"\x00" * 70),
    Stanza(("confirm", b64encode(b"yes").decode(), b64encode(b"no").decode()), b"go on?"),
    Stanza(("request-secret",), b"PIN?"),
    Stanza(("file-key", "0"), FILE_KEY),
    Stanza(("done",), b""),
)
UNWRAP_ANSWERS = _stanzas(
    Stanza(("ok",), b""),
    Stanza(("unsupported",), b""),
    Stanza(("ok", "yes"), b""),
    Stanza(("ok",), b"s3cret"),
    Stanza(("ok",), b""),
)


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (taken modulo its length), no empty piece."""
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _client_verdict(transcript: bytes, cuts: list[int]) -> tuple[object, ...]:
    client = PluginClient.unwrap("t", "AGE-PLUGIN-T-1", [Stanza(("x",), b"")], ui=_ui())
    client.data_to_send()
    answers = bytearray()
    try:
        for piece in _pieces(transcript, cuts):
            client.receive_data(piece)
            answers += client.data_to_send()
        client.receive_data(b"")
    except PluginError as exc:
        return ("error", str(exc), bytes(answers))
    return ("ok", client.file_key, bytes(answers))


def test_the_client_answers_each_request_as_the_spec_says() -> None:
    assert _client_verdict(UNWRAP_TRANSCRIPT, []) == ("ok", FILE_KEY, UNWRAP_ANSWERS)


def test_the_client_is_non_interactive_by_default() -> None:
    client = PluginClient.unwrap("t", "AGE-PLUGIN-T-1", [], ui=PluginUI())
    client.data_to_send()
    client.receive_data(UNWRAP_TRANSCRIPT)
    assert client.finished and client.file_key == FILE_KEY
    fail = _encode_stanza(Stanza(("fail",), b""))
    assert client.data_to_send() == fail + _stanzas(Stanza(("unsupported",), b"")) + fail * 2 + (
        _encode_stanza(Stanza(("ok",), b""))
    )


def test_the_client_sends_phase_one_as_age_does() -> None:
    client = PluginClient.wrap("t", "age1t1xyz", FILE_KEY, ui=PluginUI())
    server = PluginServer("recipient-v1")
    server.receive_data(client.data_to_send())
    request = server.next_event()
    assert request == WrapRequest(("age1t1xyz",), (), (FILE_KEY,), True)
    unwrap = PluginClient.unwrap("t", "AGE-PLUGIN-T-1X", [Stanza(("a", "b"), b"c")], ui=PluginUI())
    assert unwrap.data_to_send() == (
        b"-> add-identity AGE-PLUGIN-T-1X\n\n-> recipient-stanza 0 a b\nYw\n-> done\n\n"
    )


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_chunking_gives_the_client_one_verdict(cuts: list[int]) -> None:
    assert _client_verdict(UNWRAP_TRANSCRIPT, cuts) == _client_verdict(UNWRAP_TRANSCRIPT, [])
    bad = UNWRAP_TRANSCRIPT.replace(b"file-key 0", b"file-key 7")
    assert _client_verdict(bad, cuts)[:2] == _client_verdict(bad, [])[:2]
    assert _client_verdict(bad, [])[0] == "error"


PHASE1 = _stanzas(
    Stanza(("add-identity", "AGE-PLUGIN-T-1A"), b""),
    Stanza(("recipient-stanza", "0", "t", "x"), b"one"),
    Stanza(("grease", "-"), b"\xff" * 100),
    Stanza(("add-identity", "AGE-PLUGIN-T-1B"), b""),
    Stanza(("recipient-stanza", "0", "X25519", "y"), b"two"),
    Stanza(("recipient-stanza", "1", "t", "z"), b"three"),
    Stanza(("done",), b""),
)


def _server_verdict(data: bytes, cuts: list[int]) -> object:
    server = PluginServer("identity-v1")
    try:
        for piece in _pieces(data, cuts):
            server.receive_data(piece)
    except PluginError as exc:
        return str(exc)
    return server.next_event()


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_chunking_gives_the_plugin_one_verdict(cuts: list[int]) -> None:
    expected = UnwrapRequest(
        ("AGE-PLUGIN-T-1A", "AGE-PLUGIN-T-1B"),
        (
            (Stanza(("t", "x"), b"one"), Stanza(("X25519", "y"), b"two")),
            (Stanza(("t", "z"), b"three"),),
        ),
    )
    assert _server_verdict(PHASE1, cuts) == expected
    assert _server_verdict(PHASE1, []) == expected
    skipped = PHASE1.replace(b"recipient-stanza 1", b"recipient-stanza 2")
    assert (
        _server_verdict(skipped, cuts)
        == _server_verdict(skipped, [])
        == ("age plugin protocol: file indices must count up from 0")
    )


@pytest.mark.parametrize(
    ("transcript", "message"),
    [
        (b"-> done extra\n\n", "'done' with arguments"),
        (b"-> file-key 0\n" + b64encode(bytes(15)) + b"\n", "not 16 bytes"),
        (_stanzas(Stanza(("file-key", "0"), FILE_KEY)) * 2, "second file-key"),
        (b"-> file-key 00\nAAAAAAAAAAAAAAAAAAAAAA\n", "not a decimal index"),
        (b"-> msg\nAAA=\n", "not base64"),
        (b"-> msg\nAB\n", "not canonical base64"),
        (b"-> msg\n" + b"A" * 65, "longer than 64 columns"),
        (b"-> confirm\n\n", "one or two choices"),
        (b"-> confirm !!\n\n", "not base64"),
        (b"->  msg\n\n", "malformed stanza"),
        (b"-> done\n\n-> msg\n\n", "data after the final 'done'"),
        (b"-> done\n\n->", "data after the final 'done'"),
        (b"-> msg\n", "exited"),
    ],
)
def test_out_of_protocol_output_is_a_plugin_error(transcript: bytes, message: str) -> None:
    client = PluginClient.unwrap("t", "AGE-PLUGIN-T-1", [], ui=PluginUI())
    with pytest.raises(PluginError, match=message):
        client.receive_data(transcript)
        client.receive_data(b"")
    with pytest.raises(PluginError, match="already failed"):  # broken for good
        client.receive_data(b"-> done\n\n")


def test_the_plugin_side_takes_replies_only_when_due() -> None:
    server = PluginServer("recipient-v1")
    with pytest.raises(PluginError, match="read the request"):
        server.send("msg", body=b"early")
    server = PluginServer("recipient-v1")
    server.receive_data(
        b"-> add-recipient age1x\n\n-> wrap-file-key\n" + b64encode(FILE_KEY) + b"\n-> done\n\n"
    )
    assert isinstance(server.next_event(), WrapRequest)
    server.send("request-secret", body=b"PIN?")
    with pytest.raises(PluginError, match="before the last reply"):
        server.send("msg")
    server.receive_data(b"-> ok\nMTIzNA\n")
    assert server.next_event() == PluginReply(True, (), b"1234")
    server.done()
    assert server.data_to_send().endswith(b"-> done\n\n")
    late = PluginServer("identity-v1")
    late.receive_data(b"-> done\n\n")
    with pytest.raises(PluginError, match="no reply was due"):
        late.receive_data(b"-> ok\n\n")


class _Loop(io.RawIOBase):
    """The plugin's stdin and stdout wired to a client in this process: what the plugin
    writes goes to the client, what it reads is the client's answer."""

    def __init__(self, client: PluginClient) -> None:
        self.client = client

    def read1(self, size: int = -1) -> bytes:
        return self.client.data_to_send()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.client.receive_data(bytes(data))
        return len(data)


def _serve(machine: str, client: PluginClient) -> None:
    loop = _Loop(client)
    serve(machine, soft_pkcs11.SoftKey.from_uri, loop, loop)  # type: ignore[arg-type]


def test_the_plugin_main_in_process() -> None:
    """serve() with the soft key: wrap, then unwrap what it wrapped."""
    client = PluginClient.wrap("pkcs11", recipient_for(URI), FILE_KEY, ui=PluginUI())
    _serve("recipient-v1", client)
    assert client.finished and [s.args for s in client.stanzas] == [("pkcs11", key_tag(URI))]
    unwrap = PluginClient.unwrap("pkcs11", identity_for(URI), client.stanzas, ui=PluginUI())
    _serve("identity-v1", unwrap)
    assert unwrap.finished and unwrap.file_key == FILE_KEY
    other = PluginClient.unwrap("pkcs11", identity_for(OTHER_URI), client.stanzas, ui=PluginUI())
    _serve("identity-v1", other)
    assert other.finished and other.file_key is None


def test_the_plugin_refuses_a_recipient_not_its_own() -> None:
    bad = bech32_encode("age1pkcs11", b"http://x")
    client = PluginClient.wrap("pkcs11", bad, FILE_KEY, ui=PluginUI())
    with pytest.raises(PluginError, match="failed \\(recipient 0\\): a PKCS#11 key is named"):
        _serve("recipient-v1", client)


def test_the_plugin_reports_a_tampered_stanza_of_its_key() -> None:
    client = PluginClient.wrap("pkcs11", recipient_for(URI), FILE_KEY, ui=PluginUI())
    _serve("recipient-v1", client)
    stanza = client.stanzas[0]
    tampered = Stanza(stanza.args, bytes([stanza.body[0] ^ 1]) + stanza.body[1:])
    unwrap = PluginClient.unwrap("pkcs11", identity_for(URI), [tampered], ui=PluginUI())
    with pytest.raises(PluginError, match="failed \\(stanza 0 0\\): wrong key or tampered"):
        _serve("identity-v1", unwrap)


# ------------------------------------------------------------------------ the command

REPO = Path(__file__).resolve().parent.parent


def _sc(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *args],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )


def test_the_command_takes_plugin_recipients_and_identities(plugins: Path, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(MESSAGE)
    (tmp_path / "id.txt").write_text(f"# token key\n{identity_for(URI)}\n")
    (tmp_path / "team.txt").write_text(f"{recipient_for(OTHER_URI)}\n")
    made = _sc("-r", recipient_for(URI), "-R", "team.txt", "-o", "a.age", "in.txt", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    header = age.parse_header((tmp_path / "a.age").read_bytes())
    assert header is not None and [s.args[1] for s in header.stanzas] == [
        key_tag(URI),
        key_tag(OTHER_URI),
    ]
    read = _sc("-d", "-i", "id.txt", "a.age", cwd=tmp_path)
    assert read.returncode == 0 and read.stdout == MESSAGE, read.stderr
    # -e -i: the identity file's plugin identity as a recipient (age's add-identity)
    assert _sc("encrypt", "-i", "id.txt", "-o", "b.age", "in.txt", cwd=tmp_path).returncode == 0
    assert _sc("decrypt", "-i", "id.txt", "b.age", cwd=tmp_path).stdout == MESSAGE
    if AGE is not None:
        assert _age("-d", "-i", str(tmp_path / "id.txt"), str(tmp_path / "b.age")) == MESSAGE


def test_the_command_exits_3_for_a_missing_or_failing_plugin(plugins: Path, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(b"x")
    missing = _sc("-r", age.plugin_recipient("nosuch", b"k"), "-o", "a.age", "in.txt", cwd=tmp_path)
    assert missing.returncode == 3
    assert b"no age-plugin-nosuch on PATH" in missing.stderr
    assert not (tmp_path / "a.age").exists()
    (tmp_path / "id.txt").write_text(identity_for(URI) + "\n")
    no_public = _sc("keygen", "-y", "id.txt", cwd=tmp_path)
    assert no_public.returncode == 3 and b"plugin identity" in no_public.stderr


def test_the_console_script_names_the_plugin_main(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    from streamcrypt.cli import _age_plugin_pkcs11

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["age-plugin-pkcs11"] == "streamcrypt.cli._age_plugin_pkcs11:main"
    assert _age_plugin_pkcs11.main(["--identity", URI]) == 0
    assert capsys.readouterr().out == f"# recipient: {recipient_for(URI)}\n{identity_for(URI)}\n"
    assert _age_plugin_pkcs11.main(["--identity", URI + ";pin-value=1234"]) == 1
    assert "without pin-value" in capsys.readouterr().err


@pytest.mark.anyio
async def test_a_cancelled_caller_leaves_no_plugin_behind(plugins: Path) -> None:
    """The session runs on the engine's worker; a caller cancelled while a plugin hangs
    returns at once, and the plugin is killed and reaped when its answer's time is up."""
    import anyio

    pidfile = _fake(plugins, "hangs", FAKES["hangs"][0])
    recipient = age.PluginRecipient(bech32_encode("age1hangs", b"key"), timeout=1.0)

    async def source() -> AsyncIterator[bytes]:
        yield b"x" * 100_000

    started = time.monotonic()
    with anyio.move_on_after(0.3) as scope:
        async for _ in streamcrypt.encrypt(source(), format="age", recipients=recipient):
            pass
    assert scope.cancelled_caught
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not _gone(pidfile):
        assert time.monotonic() < deadline, "the plugin outlived its timeout"
        await anyio.sleep(0.05)
    assert time.monotonic() - started < 6
