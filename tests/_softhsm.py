"""A SoftHSM2 token for the tests: a fresh token directory per test session.

``SOFTHSM2_CONF`` points at a configuration in a temporary directory, so the tests never
see (or change) the machine's own tokens; SoftHSM2 reads it when the module initializes,
which is after this sets it (nothing loads the module before the first PKCS#11 test).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODULE_PATHS = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
)
TOKEN = "streamcrypt-test"
PIN = "123456"
SO_PIN = "87654321"


@dataclass(frozen=True)
class SoftHsm:
    """Where the test token is: module path, token label, its PIN, and the conf file."""

    module: str
    token: str
    pin: str
    conf: str

    def uri(self, label: str, *, pin_env: str | None = None) -> str:
        """The RFC 7512 URI of the key ``label`` in the test token."""
        query = f"module-path={self.module}"
        if pin_env is not None:
            query += f"&pin-source=env:{pin_env}"
        return f"pkcs11:token={self.token};object={label}?{query}"

    def pin_source(self) -> str:
        return self.pin


def module_path() -> str | None:
    """The SoftHSM2 module installed on this machine (``make peers``), or None."""
    return next((p for p in MODULE_PATHS if os.path.exists(p)), None)


def start(directory: Path) -> SoftHsm:
    """Initialize a fresh token under ``directory`` and point SoftHSM2 at it."""
    module = module_path()
    util = shutil.which("softhsm2-util")
    if module is None or util is None:
        raise RuntimeError("SoftHSM2 is not installed: run `make peers` (Debian softhsm2)")
    tokens = directory / "tokens"
    tokens.mkdir()
    conf = directory / "softhsm2.conf"
    conf.write_text(
        f"directories.tokendir = {tokens}\nobjectstore.backend = file\n"
        "log.level = ERROR\nslots.removable = false\n"
    )
    os.environ["SOFTHSM2_CONF"] = str(conf)
    subprocess.run(
        [util, "--init-token", "--free", "--label", TOKEN, "--pin", PIN, "--so-pin", SO_PIN],
        check=True,
        capture_output=True,
        env={**os.environ, "SOFTHSM2_CONF": str(conf)},
    )
    return SoftHsm(module, TOKEN, PIN, str(conf))


@functools.cache
def shared() -> SoftHsm:
    """This test process's one token (a module reads its configuration once per process),
    in a temporary directory removed at exit."""
    directory = tempfile.TemporaryDirectory(prefix="streamcrypt-softhsm-")
    _KEEP.append(directory)
    return start(Path(directory.name))


_KEEP: list[tempfile.TemporaryDirectory[str]] = []
