"""Start-up of the ``streamcrypt`` command and of ``import streamcrypt`` (issue 18): the
parser, ``--help``, ``--version`` and usage errors import no format, no primitive, no
pycryptodome; the package's names load on first use. Checked through ``sys.modules`` in
a fresh interpreter, never against the clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from streamcrypt.cli import _options

#: Modules that cost most of the old start-up (0.5 s), or belong to optional extras.
HEAVY = (
    "streamcrypt.codecs.age",
    "streamcrypt.codecs.aws",
    "streamcrypt.codecs.container",
    "streamcrypt.primitives",
    "streamcrypt.transports",
    "streamcrypt.engine",
    "streamcrypt.keys",
    "Crypto",
    "argon2",
    "aws_encryption_sdk",
    "cryptography.hazmat.primitives.ciphers.aead",
    "anyio",
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


def test_dir_and_star_import_list_every_lazy_name() -> None:
    import streamcrypt
    import streamcrypt.codecs

    for module in (streamcrypt, streamcrypt.codecs):
        assert set(module.__all__) <= set(dir(module))
        namespace: dict[str, object] = {}
        exec(f"from {module.__name__} import *", namespace)
        assert set(module.__all__) <= set(namespace)
