"""End to end in headless Chromium: the example file drop (examples/filedrop) under uvicorn.

Debian's ``chromium`` (``make test`` installs it: the Makefile's ``peers``),
driven by Playwright with ``executable_path`` (never Playwright's own browser download).
The app runs on 127.0.0.1 on a random port, started and stopped here. Each size (1 KiB,
1 MiB, 64 MiB) goes up through the drop page (encrypted in the page, the server stores
ciphertext only: the stored file decrypts in Python with the key from the link's
fragment to the very bytes of the file) and down through the recipient's page (which
reports the SHA-256 of what it decrypted), and both ways through the page talking to the
app behind EncryptionMiddleware. A tampered or cut-off drop fails in the page with the
module's typed error. A screenshot of the finished pages goes under the test's tmp dir.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from streamcrypt.codecs.ece import EceDecryptor

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
#: Chromium as root needs --no-sandbox; the rest keep it off the (closed) network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]
SIZES = {"1KiB": 1 << 10, "1MiB": 1 << 20, "64MiB": 64 << 20}
WAIT_MS = 60_000


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium under Playwright (the benchmark uses it too)."""
    assert os.path.exists(CHROMIUM), "chromium is missing: `make test` installs it (peers)"
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def filedrop_app() -> Any:
    """examples/filedrop/app.py as a module (the examples are not a package)."""
    spec = importlib.util.spec_from_file_location("filedrop_app", ROOT / "examples/filedrop/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def b64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Served:
    def __init__(self, base: str, storage: Path) -> None:
        self.base = base
        self.storage = storage


def start_filedrop(workdir: Path) -> tuple[subprocess.Popen[bytes], Served]:
    """examples/filedrop/app.py under uvicorn on 127.0.0.1, a random port."""
    port_file = workdir / "port.json"
    storage = workdir / "drops"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples/filedrop/app.py"),
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--storage",
            str(storage),
        ],
        env=env,
    )
    deadline = time.monotonic() + 20
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the file drop app did not start")
        time.sleep(0.05)
    port = json.loads(port_file.read_text())["port"]
    return proc, Served(f"http://127.0.0.1:{port}", storage)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    proc, served = start_filedrop(tmp_path_factory.mktemp("filedrop"))
    try:
        yield served
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("files")
    out = {}
    for name, size in SIZES.items():
        out[name] = where / f"{name}.bin"
        out[name].write_bytes(os.urandom(size))
    return out


def finished(page: Any) -> dict[str, str]:
    """Wait for the page's status to settle; its data attributes."""
    status = page.locator("#status")
    page.wait_for_function(
        "() => ['done', 'error'].includes(document.getElementById('status').dataset.state)",
        timeout=WAIT_MS,
    )
    return dict(status.evaluate("el => ({...el.dataset})"))


def drop(page: Any, served: Served, path: Path) -> dict[str, str]:
    page.goto(served.base + "/")
    page.set_input_files("#file", str(path))
    page.click("#send")
    return finished(page)


def receive(page: Any, link: str) -> dict[str, str]:
    page.goto(link)
    page.click("#get")
    return finished(page)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("size", list(SIZES))
def test_drop_up_and_down(
    size: str, page: Any, served: Served, files: dict[str, Path], tmp_path: Path
) -> None:
    path = files[size]
    digest = sha256(path)
    up = drop(page, served, path)
    assert up["state"] == "done", up
    assert (up["sha256"], int(up["bytes"])) == (digest, SIZES[size])
    link = up["link"]
    drop_id, key_text = link.split("#", 1)[1].split(".")
    # The server holds ciphertext only, and it is the file's, byte for byte.
    stored = (served.storage / f"{drop_id}.aes128gcm").read_bytes()
    assert len(stored) == int(up["ciphertext"]) > SIZES[size]
    dec = EceDecryptor(b64u(key_text))
    assert dec.update(stored) + dec.finalize() == path.read_bytes()
    assert path.read_bytes()[:64] not in stored
    down = receive(page, link)
    assert down["state"] == "done", down
    assert (down["sha256"], int(down["bytes"])) == (digest, SIZES[size])
    page.screenshot(path=tmp_path / f"filedrop-received-{size}.png")
    assert (tmp_path / f"filedrop-received-{size}.png").read_bytes()[:4] == b"\x89PNG"


def test_tampered_and_cut_drops_fail_in_the_page(
    page: Any, served: Served, files: dict[str, Path], tmp_path: Path
) -> None:
    up = drop(page, served, files["1MiB"])
    link = up["link"]
    stored = served.storage / (link.split("#", 1)[1].split(".")[0] + ".aes128gcm")
    body = bytearray(stored.read_bytes())
    body[len(body) // 2] ^= 0x01
    stored.write_bytes(body)
    down = receive(page, link)
    assert (down["state"], down["error"]) == ("error", "AuthenticationError"), down
    page.screenshot(path=tmp_path / "filedrop-tampered.png")
    body[len(body) // 2] ^= 0x01
    stored.write_bytes(body[: 21 + 3 * 65536])  # cut at a record boundary
    down = receive(page, link)
    assert (down["state"], down["error"]) == ("error", "TruncatedStreamError"), down
    stored.write_bytes(body)
    assert receive(page, link)["state"] == "done"


@pytest.mark.parametrize("size", list(SIZES))
def test_server_holds_the_key_both_ways(
    size: str, page: Any, served: Served, files: dict[str, Path], tmp_path: Path
) -> None:
    path = files[size]
    page.goto(served.base + "/server")
    page.set_input_files("#file", str(path))
    page.click("#upload")
    up = finished(page)
    assert up["state"] == "done", up
    assert up["server"] == up["sha256"] == sha256(path)  # what the handler read, decrypted
    assert int(up["serverBytes"]) == SIZES[size]
    page.fill("#size", str(SIZES[size]))
    page.click("#blob")
    got = finished(page)
    assert got["state"] == "done", got
    assert got["sha256"] == got["expected"] == filedrop_app().generated_digest(SIZES[size])
    assert int(got["bytes"]) == SIZES[size]
    page.screenshot(path=tmp_path / f"server-holds-key-{size}.png")
