"""Test configuration: the anyio backend matrix and the vector-count summary."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import VECTOR_COUNTS

try:
    import uvloop
except ImportError:  # pragma: no cover - platforms without uvloop
    uvloop = None

_BACKENDS: list[Any] = [
    pytest.param(("asyncio", {}), id="asyncio"),
    pytest.param(("trio", {}), id="trio"),
]
if uvloop is not None:
    _BACKENDS.insert(
        1, pytest.param(("asyncio", {"loop_factory": uvloop.new_event_loop}), id="uvloop")
    )


@pytest.fixture(params=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """Every ``@pytest.mark.anyio`` test runs on asyncio, asyncio+uvloop and trio."""
    return request.param


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not VECTOR_COUNTS:
        return
    terminalreporter.section("official vectors run")
    total = 0
    for name, ran, expected in sorted(VECTOR_COUNTS):
        total += ran
        mark = "ok" if ran == expected else "SHORT"
        terminalreporter.write_line(f"{name:<60} {ran:>6} / {expected:<6} {mark}")
    terminalreporter.write_line(f"{'total':<60} {total:>6}")


@pytest.fixture(scope="session")
def softhsm() -> Any:
    """This process's fresh SoftHSM2 token (streamcrypt.testing.softhsm_token); skips the
    test where SoftHSM2 or python-pkcs11 is missing."""
    from streamcrypt.testing import softhsm_token

    pytest.importorskip("pkcs11")
    try:
        hsm = softhsm_token()
    except RuntimeError as exc:  # SoftHSM2 is not installed (make peers)
        pytest.skip(str(exc))
    return hsm


@pytest.fixture(scope="session")
def xfs_dir() -> Iterator[Path]:
    """A directory on a fresh XFS with reflinks, for the session
    (streamcrypt.testing.reflink_mount: a sparse image, a loop mount, unmounted after).
    Fails, never skips, where it cannot mount: root, xfsprogs (make peers) and the
    kernel's xfs are this suite's set-up, as the other peers are."""
    from streamcrypt.testing import reflink_mount

    with contextlib.ExitStack() as stack:
        try:
            path = stack.enter_context(reflink_mount())
        except RuntimeError as exc:
            pytest.fail(f"no XFS with reflinks for the re-key tests: {exc}", pytrace=False)
        yield Path(path)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``STREAMCRYPT_NO_SKIPS=1`` (``make test``, so CI) a skipped test fails the
    run: a peer that is missing (age, restic, SoftHSM2, Chromium, an extra) is a broken
    set-up, never a pass."""
    if os.environ.get("STREAMCRYPT_NO_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter.write_line(
            f"{len(skipped)} test(s) skipped under STREAMCRYPT_NO_SKIPS=1: install the "
            "peers (make peers) and every extra (make test does both)"
        )
