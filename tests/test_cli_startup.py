"""Start-up of the ``streamcrypt`` command and of ``import streamcrypt`` (issue 18): the
parser, ``--help``, ``--version`` and usage errors import no format, no primitive, no
pycryptodome; the package's names load on first use; age encryption to a recipient,
decryption with an identity and ``keygen`` import no password KDF, SSH key code, event
loop, thread pool or logging. Checked through ``sys.modules`` in a fresh interpreter,
never against the clock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamcrypt.cli import _options

#: Modules that cost most of the old start-up (0.5 s), or belong to optional extras.
HEAVY = (
    "streamcrypt.codecs.age",
    "streamcrypt.codecs.aws",
    "streamcrypt.codecs.container",
    "streamcrypt.primitives",
    "streamcrypt.transports._files",
    "streamcrypt.transports._stream",
    "streamcrypt.engine",
    "streamcrypt.keys",
    "Crypto",
    "argon2",
    "aws_encryption_sdk",
    "cryptography.hazmat.primitives.ciphers.aead",
    "anyio",
)

#: What the parser, ``--help`` and usage errors need none of: typing, dataclasses
#: (inspect) and shutil (argparse's terminal width) cost ~20 ms together.
NOT_FOR_PARSER = ("typing", "dataclasses", "inspect", "shutil")

#: What an age recipient's encryption, an identity's decryption and keygen need none of
#: (they cost the command ~150 ms before issue 18): the password KDFs and the key ring,
#: SSH keys (cryptography's serialization, bcrypt), libsodium, the async pipeline and
#: event loop, thread pools and logging, sockets and files, prompts, pathlib.
NOT_FOR_AGE = (
    "streamcrypt.keys._password",
    "streamcrypt.keys._argon2",
    "streamcrypt.keys._keyring",
    "streamcrypt.codecs.container",
    "streamcrypt.codecs.envelope",
    "streamcrypt.engine._pipeline",
    "streamcrypt.primitives._signing",
    "streamcrypt.primitives._taps",
    "streamcrypt.transports._files",
    "streamcrypt.transports._stream",
    "nacl",
    "nacl.pwhash",
    "cryptography.hazmat.primitives.serialization",
    "cryptography.hazmat.primitives.kdf.scrypt",
    "bcrypt",
    "anyio",
    "asyncio",
    "concurrent.futures",
    "logging",
    "socket",
    "shutil",
    "getpass",
    "pathlib",
    "argon2",
    "Crypto",
)

_PROBE = """
import json, sys
sys.argv = ["streamcrypt", *json.loads(sys.argv[1])]
from streamcrypt.cli import main
try:
    code = main()
except SystemExit as exc:
    code = exc.code
print(json.dumps([code, sorted(sys.modules)]), file=sys.__stderr__)
"""


def _loaded(argv: list[str]) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return code, set(modules)


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["encrypt", "--help"], 0),
        (["keygen", "--help"], 0),
        ([], 2),
        (["encrypt", "--no-such-option"], 2),
        (["no-such-command"], 2),
    ],
)
def test_help_version_and_usage_errors_import_no_format(argv: list[str], code: int) -> None:
    got, modules = _loaded(argv)
    assert got == code
    assert sorted(m for m in HEAVY if m in modules) == []
    assert sorted(m for m in NOT_FOR_PARSER if m in modules) == []


def test_python_m_streamcrypt_help_imports_no_format() -> None:
    probe = (
        "import runpy, sys; sys.argv = ['streamcrypt', '--help']\n"
        "try:\n    runpy.run_module('streamcrypt', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.__stderr__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_import_streamcrypt_loads_names_on_first_use() -> None:
    probe = (
        "import sys, streamcrypt\n"
        f"before = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "streamcrypt.encrypt_bytes; import streamcrypt.codecs as c; c.FORMATS['age']\n"
        "print(before, 'streamcrypt.codecs.age' in sys.modules, file=sys.__stderr__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.strip().splitlines()[-1] == "[] True"


def test_the_parsers_literals_agree_with_the_codecs() -> None:
    from streamcrypt.cli._crypt import KDF_LEVELS
    from streamcrypt.codecs import age, container

    assert tuple(sorted(container.SUITE_IDS)) == _options.SUITES
    assert container.DEFAULT_SEGMENT_SIZE == _options.SEGMENT_SIZE
    assert age.DEFAULT_WORK_FACTOR == _options.AGE_WORK_FACTOR
    assert tuple(sorted(KDF_LEVELS)) == _options.KDF_LEVEL_NAMES
    assert container.MAX_HEADER_SIZE == _options.NATIVE_MAX_HEADER_SIZE


def test_the_magics_the_command_detects_by_agree_with_the_codecs() -> None:
    """Decryption rules a format of :data:`_options.MAGICS` out by its magic without
    importing it: that is all the codec's own detection does for it."""
    import streamcrypt.keys
    from streamcrypt.cli._crypt import KDF_LEVELS
    from streamcrypt.codecs import FORMATS, container, envelope, rclone

    assert _options.MAGICS == {
        "native": container.MAGIC,
        "envelope": envelope.MAGIC,
        "rclone": rclone.MAGIC,
    }
    for name, magic in _options.MAGICS.items():
        fmt = FORMATS[name]
        assert fmt.armor is None, name
        assert fmt.identifies(magic + b"rest"), name
        assert not fmt.identifies(magic[:-1]), name
        assert not fmt.identifies(b" " + magic), name
    for level in KDF_LEVELS.values():
        assert isinstance(getattr(streamcrypt.keys, level), streamcrypt.keys.Argon2Params)


def test_dir_and_star_import_list_every_lazy_name() -> None:
    import streamcrypt
    import streamcrypt.codecs
    import streamcrypt.engine
    import streamcrypt.keys
    import streamcrypt.primitives
    import streamcrypt.transports

    for module in (
        streamcrypt,
        streamcrypt.codecs,
        streamcrypt.keys,
        streamcrypt.primitives,
        streamcrypt.engine,
        streamcrypt.transports,
    ):
        assert set(module.__all__) <= set(dir(module))
        namespace: dict[str, object] = {}
        exec(f"from {module.__name__} import *", namespace)
        assert set(module.__all__) <= set(namespace)


def test_age_encrypt_decrypt_and_keygen_import_only_what_they_use(tmp_path: Path) -> None:
    from streamcrypt.codecs.age import X25519Identity

    identity = X25519Identity.generate()
    (tmp_path / "id.txt").write_text(identity.to_string() + "\n")
    plain = tmp_path / "small.bin"
    plain.write_bytes(b"issue 18 " * 100)
    sealed, opened = tmp_path / "small.age", tmp_path / "small.out"
    runs = {
        "encrypt": ["encrypt", "-r", str(identity.recipient), "-o", str(sealed), str(plain)],
        "decrypt": ["decrypt", "-i", str(tmp_path / "id.txt"), "-o", str(opened), str(sealed)],
        "keygen": ["keygen", "-t", "age", "-o", str(tmp_path / "new.txt")],
    }
    for name, argv in runs.items():
        code, modules = _loaded(argv)
        assert code == 0, name
        assert "streamcrypt.codecs.age" in modules, name  # the probe saw the real run
        assert sorted(m for m in NOT_FOR_AGE if m in modules) == [], name
    assert opened.read_bytes() == plain.read_bytes()


def test_a_lazy_package_imports_only_the_module_of_the_name_read() -> None:
    probe = (
        "import sys\n"
        "import streamcrypt.keys as k, streamcrypt.engine as e\n"
        "k.SecretKey; e.run_verified\n"
        "from streamcrypt.keys import keyfile\n"
        "missing = hasattr(k, 'no_such_name')\n"
        "names = ('streamcrypt.keys._secret', 'streamcrypt.keys._password', "
        "'streamcrypt.engine._batches', 'streamcrypt.engine._pipeline', 'anyio')\n"
        "print([n in sys.modules for n in names], keyfile.__name__, missing, "
        "file=sys.__stderr__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.strip().splitlines()[-1] == (
        "[True, False, True, False, False] streamcrypt.keys.keyfile False"
    )


def test_top_level_help_imports_no_argparse() -> None:
    """``--help`` / ``-h`` print the command list without argparse and what it imports
    (re, enum, gettext, locale, textwrap: about 20 ms of start-up)."""
    for argv in (["--help"], ["-h"]):
        code, modules = _loaded(argv)
        assert code == 0
        # (the probe's own json brings re and enum: only what argparse alone adds)
        assert sorted(m for m in ("argparse", "gettext", "textwrap") if m in modules) == []


@pytest.mark.parametrize("width", [20, 49, 50, 57, 80, 123, 300])
def test_top_level_help_is_what_argparse_prints(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The argparse-free ``--help`` is argparse's own output, character for character,
    at every terminal width (narrower than MIN_COLUMNS, argparse prints it), and lists
    every command the parser has but the hidden ones."""
    import contextlib
    import io

    from streamcrypt.cli import main
    from streamcrypt.cli._parser import build_parser
    from streamcrypt.cli._usage import COMMANDS

    monkeypatch.setenv("COLUMNS", str(width))
    parser = build_parser(None)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            code = main(["--help"])
        except SystemExit as exc:  # narrower than MIN_COLUMNS: argparse prints and exits
            code = exc.code
    assert code == 0
    assert printed.getvalue() == parser.format_help()
    listed = {a.dest for a in parser._subparsers._group_actions[0]._choices_actions}  # type: ignore[union-attr]
    assert listed == set(COMMANDS)
