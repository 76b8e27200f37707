"""The browser end in headless Chromium (Debian's ``chromium`` under Playwright).

A Starlette app under uvicorn (a process of its own, ``EncryptionMiddleware`` on
``/sealed``, the browser module served at ``/ece.js``) and one page that times, in the
page: a 256 MiB download read with a plain ``fetch`` against the same bytes as an
``aes128gcm`` response decrypted as it streams (``encryptedFetch``: every record verified
before its bytes are read); the page's own cost without the server's: a stored
``aes128gcm`` file (written once before timing, served as a plain file with no
middleware, as the file drop serves a drop) decrypted as it streams (``decryptStream``)
against a plain ``fetch`` of a stored plain file of the same size; a 256 MiB upload of a
Blob with a plain ``fetch`` against ``encryptedFetch``'s (encrypted in the page into a
Blob, then sent: Chromium does not stream a fetch upload over HTTP/1.1). Memory: the
renderer process's peak RSS (sampled from ``/proc`` every 20 ms, less its RSS before the
run) and the page's peak ``performance.memory.usedJSHeapSize`` (Chromium's precise memory
info). Rows alternate plain and encrypted runs and quote medians.
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ._procs import ServerProcess, announce
from ._report import Report

MiB = 1 << 20
BLOCK = bytes(range(256)) * 4096
#: Flags beside the end-to-end tests' (tests/test_browser_e2e.py, the one list of what
#: keeps Chromium off this machine's closed network): memory figures and gc() for the page.
MEASURING_ARGS = ["--enable-precise-memory-info", "--js-flags=--expose-gc"]

PAGE = """<!doctype html><meta charset="utf-8"><title>bench</title>
<script type="module">
import { decryptStream, encryptedFetch } from "/ece.js";
window.key = Uint8Array.from("%KEY%".match(/../g), (h) => parseInt(h, 16));
window.keyid = "%KEYID%";
let peakHeap = 0;
let live = false;
// The live heap: after a collection, so garbage not yet swept does not count.
const sample = () => {
  if (live) gc();
  peakHeap = Math.max(peakHeap, performance.memory.usedJSHeapSize);
};
async function drain(body) {
  const reader = body.getReader();
  let n = 0;
  let next = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.length;
    if (live && n >= next) {  // memory runs: the live heap every 2 MiB read
      sample();
      next += 2 << 20;
    }
  }
}
window.bench = async (what, size, memory) => {
  live = memory;
  if (live) gc();
  peakHeap = performance.memory.usedJSHeapSize;
  const heapBefore = peakHeap;
  // Only in the memory runs (collections are slow): downloads sample as they read, uploads
  // (read by the browser) on a timer.
  const timer = memory && what.startsWith("upload") ? setInterval(sample, 50) : 0;
  const t0 = performance.now();
  let n;
  if (what === "download-plain") {
    n = await drain((await fetch(`/plain/blob?size=${size}`)).body);
  } else if (what === "download-ciphertext") {  // the sealed response, not decrypted
    n = await drain((await fetch(`/sealed/blob?size=${size}`)).body);
  } else if (what === "download-sealed") {
    n = await drain((await encryptedFetch(`/sealed/blob?size=${size}`, { key, keyid })).body);
  } else if (what === "stored-plain") {
    n = await drain((await fetch(`/stored/plain-${size}`)).body);
  } else if (what === "stored-sealed") {  // stored ciphertext, decrypted as the file drop does
    const body = (await fetch(`/stored/sealed-${size}`)).body;
    n = await drain(body.pipeThrough(decryptStream({ key })));
  } else {
    const block = new Uint8Array(1 << 20).map((_, i) => i & 255);
    // Plain: a Blob of the bytes. Sealed: the same bytes as a stream, encrypted into a
    // Blob (a Blob source besides would double what Chromium's blob storage holds, and
    // at 256 MiB the upload then failed: TypeError: Failed to fetch).
    let left = size >> 20;
    const source = what === "upload-plain"
      ? new Blob(Array.from({ length: left }, () => block))
      : new ReadableStream({ pull(c) { if (left-- > 0) c.enqueue(block.slice()); else c.close(); } });
    const t1 = performance.now();
    const response = what === "upload-plain"
      ? await fetch("/plain/upload", { method: "POST", body: source })
      : await encryptedFetch("/sealed/upload", { key, keyid, method: "POST", body: source });
    clearInterval(timer);
    n = (await response.json()).bytes;
    return { n, ms: performance.now() - t1, heap: peakHeap - heapBefore };
  }
  clearInterval(timer);
  return { n, ms: performance.now() - t0, heap: peakHeap - heapBefore };
};
window.ready = true;
</script>"""


#: What the page times (``window.bench``), in the order each round runs them, and each
#: row's label; a row's "vs plain" is against the ``-plain`` row of its kind.
LABELS = {
    "download-plain": "download, plain fetch",
    "download-ciphertext": "download, plain fetch of the aes128gcm body (not decrypted)",
    "download-sealed": "download, aes128gcm (ece.js)",
    "stored-plain": "download of a stored plain file, plain fetch",
    "stored-sealed": "download of a stored aes128gcm file, decrypted as it streams (ece.js)",
    "upload-plain": "upload, plain fetch",
    "upload-sealed": "upload, aes128gcm (ece.js)",
}


def _generated(size: int) -> AsyncIterator[bytes]:
    async def gen() -> AsyncIterator[bytes]:
        left = size
        while left:
            piece = BLOCK[: min(left, len(BLOCK))]
            left -= len(piece)
            yield piece

    return gen()


def serve(args: list[str]) -> None:
    """The server process: ``python -m bench._procs browser KEYHEX SIZE...``."""
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp:
        _serve(args[0], [int(n) for n in args[1:]], Path(tmp))


def _serve(keyhex: str, sizes: list[int], tmp: Path) -> None:
    """Store a plain file and its aes128gcm ciphertext of each size in ``tmp``, then serve."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import (
        FileResponse,
        HTMLResponse,
        JSONResponse,
        Response,
        StreamingResponse,
    )
    from starlette.routing import Route

    import streamcrypt
    from streamcrypt.codecs.ece import OVERHEAD
    from streamcrypt.keys import KeyRing, SecretKey
    from streamcrypt.transports import DEFAULT_HTTP_RECORD_SIZE, EncryptionMiddleware

    ring = KeyRing([SecretKey(bytes.fromhex(keyhex), key_id="bench")])
    stored: dict[str, Path] = {}
    for size in sizes:
        plain = (BLOCK * -(-size // len(BLOCK)))[:size]
        # The middleware's records (rs 64 KiB), and its key id.
        sealed = streamcrypt.encrypt_bytes(
            plain, ring, format="ece", segment_size=DEFAULT_HTTP_RECORD_SIZE - OVERHEAD
        )
        for name, body in ((f"plain-{size}", plain), (f"sealed-{size}", sealed)):
            stored[name] = tmp / name
            stored[name].write_bytes(body)

    async def page(request: Request) -> Response:
        html = PAGE.replace("%KEY%", keyhex).replace("%KEYID%", "bench")
        return HTMLResponse(html)

    async def blob(request: Request) -> Response:
        size = int(request.query_params["size"])
        return StreamingResponse(_generated(size), media_type="application/octet-stream")

    async def file(request: Request) -> Response:
        path = stored.get(request.path_params["name"])
        if path is None:
            return Response("no such file\n", status_code=404)
        return FileResponse(path, media_type="application/octet-stream")

    async def upload(request: Request) -> Response:
        n = 0
        async for piece in request.stream():
            n += len(piece)
        return JSONResponse({"bytes": n})

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/plain/blob", blob),
            Route("/sealed/blob", blob),
            Route("/stored/{name}", file),
            Route("/plain/upload", upload, methods=["POST"]),
            Route("/sealed/upload", upload, methods=["POST"]),
        ]
    )
    wrapped = EncryptionMiddleware(
        app, key=ring, include_paths=["/sealed"], serve_browser_module="/ece.js"
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = uvicorn.Config(
        wrapped, loop="uvloop", http="h11", lifespan="off", ws="none", log_level="warning"
    )
    announce(sock.getsockname()[1])
    uvicorn.Server(config).run(sockets=[sock])


class RendererPeak:
    """Peak RSS of Chromium's renderer processes (below this one), sampled every 20 ms."""

    def __init__(self) -> None:
        import psutil

        self._root = psutil.Process()
        self._stop = threading.Event()
        self.base = self._rss()
        self.peak = self.base
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        total = 0
        for child in self._root.children(recursive=True):
            try:
                if "--type=renderer" in " ".join(child.cmdline()):
                    total += child.memory_info().rss
            except Exception:  # a process that just ended
                continue
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> RendererPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(report: Report, quick: bool = False) -> None:
    import os

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # as seeds.py
    from test_browser_e2e import CHROMIUM, CHROMIUM_ARGS

    size = (32 if quick else 256) * MiB
    small = size // 4
    repeat = 2 if quick else 3
    kinds = tuple(LABELS)
    key = os.urandom(16).hex()
    times: dict[str, list[float]] = {}
    memory: dict[tuple[str, int], tuple[int, int]] = {}
    failures: list[str] = []
    with (
        ServerProcess("browser", key, str(small), str(size), timeout=300) as server,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *MEASURING_ARGS], headless=True
        )

        def once(what: str, n: int, measure: bool) -> tuple[float, int, int] | None:
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{server.port}/")
                page.wait_for_function("() => window.ready === true")
                with RendererPeak() as rss:
                    out: dict[str, Any] = page.evaluate(
                        "([w, n, m]) => window.bench(w, n, m)", [what, n, measure]
                    )
                assert out["n"] == n or what == "download-ciphertext", (what, out)
                return out["ms"] / 1000, rss.peak - rss.base, int(out["heap"])
            except Exception as exc:  # a run that failed is reported, not fatal
                failures.append(f"{what} ({n // MiB} MiB): {str(exc).splitlines()[0]}")
                print("  failed:", failures[-1], flush=True)
                return None
            finally:
                context.close()

        try:
            for _ in range(repeat):
                for what in kinds:
                    got = once(what, size, False)
                    if got is not None:
                        times.setdefault(what, []).append(got[0])
            for what in kinds:
                for n in (small, size):
                    got = once(what, n, True)
                    if got is not None:
                        memory[what, n] = got[1], got[2]
        finally:
            browser.close()

    t = report.table(
        f"Browser: {size // MiB} MiB through Chromium {_version(CHROMIUM)} (loopback, uvicorn)",
        [
            "what",
            "MB/s",
            "vs plain",
            f"live JS heap peak, {small // MiB} / {size // MiB} MiB body (MiB)",
            f"renderer RSS peak, {small // MiB} / {size // MiB} MiB body (MiB)",
        ],
    )
    for what, label in LABELS.items():
        if what not in times:
            continue
        kind = what.split("-")[0]
        plain = statistics.median(times.get(f"{kind}-plain", [float("nan")]))
        secs = statistics.median(times[what])
        mem = [memory.get((what, n), (-MiB, -MiB)) for n in (small, size)]
        t.add(
            label,
            size / secs / 1e6,
            plain / secs,
            f"{mem[0][1] / MiB:.1f} / {mem[1][1] / MiB:.1f}",
            f"{mem[0][0] / MiB:.0f} / {mem[1][0] / MiB:.0f}",
        )
    t.notes += [
        "the ciphertext row reads the encrypted response without decrypting it: the same "
        "server work (the middleware encrypting on the same 2 cores) and the same bytes on "
        "the wire, so the sealed row against it is the page's own cost",
        "the stored rows take the server's encryption out: an aes128gcm file (64 KiB records) "
        "written before timing and served as a plain file (Starlette's FileResponse, no "
        "middleware: how the file drop serves a drop), decrypted in the page as it streams "
        "(decryptStream, each record verified before release), against a plain fetch of a "
        "stored plain file of the body's size served the same way ('vs plain' is against that "
        "row)",
        "download: read to the end in the page (the sealed one decrypted as it streams, "
        "each 64 KiB record verified before release); upload: a Blob of the size sent "
        "plain, or the same bytes as a stream encrypted into a Blob by encryptedFetch (upload: 'buffer', gathered "
        "4 MiB at a time) and sent: Chromium streams no fetch upload over HTTP/1.1",
        f"MB/s: medians of {repeat} runs, plain and encrypted alternated, a fresh page per "
        "run, no memory sampling; memory: separate runs, the page's usedJSHeapSize after a "
        "collection (gc()) every 2 MiB read (downloads) or every 50 ms (uploads), peak less "
        "its start, and the renderer processes' RSS "
        "sampled every 20 ms (peak less its start: includes garbage and the network buffers)",
        *[f"failed run: {f}" for f in failures],
    ]


def _version(chromium: str) -> str:
    import subprocess

    out = subprocess.run([chromium, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.split()[1] if out.stdout else "?"


if __name__ == "__main__":
    started = time.monotonic()
    rep = Report()
    run(rep)
    print(f"{time.monotonic() - started:.0f} s")
