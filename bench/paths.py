"""Issue 11: the engine on the paths users take, default policy against ``policy=None``.

Every row runs its variants interleaved (A B C D, A B C D, ...) in one process and quotes
medians, so that the machine's noise (steal time on a shared VM) falls on all variants
alike; the limits it is divided by (the raw kernel on one thread and on all cores, over
64 KiB segments of in-memory data) are measured interleaved in the same row.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.file import FileReadStream
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

import streamcrypt as sc
from streamcrypt.engine import DEFAULT_POLICY, keep_freed_memory

from ._report import Report, Table, proc_status, run_uvloop, ticker_lags
from .formats import CobblestonePeer, TinkPeer

KEY = bytes(range(32))
SEG = 65536
SUITES = {"AES-256-GCM": "aes-256-gcm", "ChaCha20-Poly1305": "chacha20-poly1305"}
KERNELS: dict[str, Callable[[bytes], AESGCM | ChaCha20Poly1305]] = {
    "AES-256-GCM": AESGCM,
    "ChaCha20-Poly1305": ChaCha20Poly1305,
}
POLICIES: dict[str, sc.OffloadPolicy | None] = {"default": DEFAULT_POLICY, "None": None}


class Limits:
    """The raw kernel over 64 KiB segments: one thread, and one part per core."""

    def __init__(self, data: bytes, kernel: AESGCM | ChaCha20Poly1305) -> None:
        self.view = memoryview(data)
        self.kernel = kernel
        self.cores = os.cpu_count() or 2
        self.pool = ThreadPoolExecutor(self.cores)

    def _part(self, part: memoryview) -> None:
        enc, nonce = self.kernel.encrypt, bytes(12)
        for off in range(0, len(part), SEG):
            enc(nonce, part[off : off + SEG], None)

    def one(self) -> None:
        self._part(self.view)

    def all(self) -> None:
        step = -(-len(self.view) // self.cores // SEG) * SEG
        parts = [self.view[o : o + step] for o in range(0, len(self.view), step)]
        list(self.pool.map(self._part, parts))


def interleaved(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds of each variant, run in turn ``rounds`` times (after one warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds + 1):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            if r:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _gen(data: bytes, chunk: int) -> Callable[[], AsyncIterator[bytes]]:
    def make() -> AsyncIterator[bytes]:
        async def gen() -> AsyncIterator[bytes]:
            for off in range(0, len(data), chunk):
                yield data[off : off + chunk]

        return gen()

    return make


def _drain(make_iter: Callable[[], AsyncIterator[bytes]]) -> Callable[[], object]:
    def run() -> object:
        async def main() -> int:
            n = 0
            async for piece in make_iter():
                n += len(piece)
            return n

        return run_uvloop(main)

    return run


class Row:
    """One table row: variants measured against the limits of one kernel, interleaved."""

    def __init__(self, table: Table, limits: Limits, size: int, rounds: int) -> None:
        self.table = table
        self.limits = limits
        self.size = size
        self.rounds = rounds

    def add(self, label: str, default: Callable[[], object], inline: Callable[[], object]) -> None:
        t = interleaved(
            {
                "one": self.limits.one,
                "all": self.limits.all,
                "default": default,
                "None": inline,
            },
            self.rounds,
        )
        limit_size = len(self.limits.view)
        one, all_ = limit_size / t["one"], limit_size / t["all"]
        d, n = self.size / t["default"], self.size / t["None"]
        self.table.add(
            label,
            d / 1e9,
            n / 1e9,
            f"{d / n:.2f}x",
            f"{d / one:.2f}x / {d / all_:.2f}x",
            f"{one / 1e9:.2f} / {all_ / 1e9:.2f}",
        )


COLUMNS = [
    "path",
    "default GB/s",
    "policy=None GB/s",
    "default / None",
    "default / limit (1 thread / all cores)",
    "limit GB/s (1 / all)",
]


def _iterators(report: Report, size: int, rounds: int, tmp: Path) -> None:
    data = os.urandom(size)
    path = tmp / "plain.bin"
    path.write_bytes(data)
    for suite_name, suite in SUITES.items():
        limits = Limits(data, KERNELS[suite_name](KEY))
        t = report.table(
            f"encrypt() / decrypt() async iterators, {suite_name}, {size >> 20} MiB "
            f"(medians of {rounds}, interleaved)",
            COLUMNS,
        )
        row = Row(t, limits, size, rounds)
        ct = sc.encrypt_bytes(data, KEY, suite=suite, policy=None)
        ct_path = tmp / f"ct-{suite}.sc"
        ct_path.write_bytes(ct)
        sources: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
            ("async generator, 64 KiB chunks", _gen(data, 64 << 10), _gen(ct, 64 << 10)),
            ("async generator, 1 MiB chunks", _gen(data, 1 << 20), _gen(ct, 1 << 20)),
            (
                "anyio FileReadStream (file on disk)",
                lambda: _file_stream(path),
                lambda: _file_stream(ct_path),
            ),
            ("one bytes object", lambda: data, lambda: ct),
        ]
        for label, plain_src, ct_src in sources:
            for verb in ("encrypt", "decrypt"):

                def make(policy: sc.OffloadPolicy | None, verb: str = verb) -> Callable[[], object]:
                    if verb == "encrypt":
                        return _drain(
                            lambda: sc.encrypt(plain_src(), KEY, suite=suite, policy=policy)
                        )
                    return _drain(lambda: sc.decrypt(ct_src(), KEY, policy=policy))

                row.add(f"{verb}(), {label}", make(DEFAULT_POLICY), make(None))
        t.notes.append(
            "targets (issue 11): default >= policy=None on every row; 1 MiB chunks >= 0.85x "
            "the all-cores limit, 64 KiB chunks >= 0.7x it"
        )


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    async with await FileReadStream.from_path(path) as stream:
        async for chunk in stream:
            yield chunk


def _file_stream(path: Path) -> AsyncIterator[bytes]:
    return _file_chunks(path)


def _one_shot(report: Report, sizes: list[int], rounds: int) -> None:
    t = report.table(
        f"encrypt_bytes / decrypt_bytes, AES-256-GCM (medians of {rounds}, interleaved)",
        COLUMNS,
    )
    for size in sizes:
        data = os.urandom(size)
        ct = sc.encrypt_bytes(data, KEY, policy=None)
        row = Row(t, Limits(data, AESGCM(KEY)), size, rounds)
        label = f"{size >> 20} MiB"
        row.add(
            f"encrypt_bytes {label}",
            lambda: sc.encrypt_bytes(data, KEY),
            lambda: sc.encrypt_bytes(data, KEY, policy=None),
        )
        row.add(
            f"decrypt_bytes {label}",
            lambda: sc.decrypt_bytes(ct, KEY),
            lambda: sc.decrypt_bytes(ct, KEY, policy=None),
        )
    t.notes.append("target (issue 11): 64 MiB >= 0.5x the one-thread limit")


def _files(report: Report, size: int, rounds: int, tmp: Path) -> None:
    chunk = 1 << 20
    block = os.urandom(chunk)
    t = report.table(
        f"Files on disk, {size >> 20} MiB in 1 MiB calls, AES-256-GCM (medians of {rounds}, "
        "interleaved)",
        [
            "path",
            "GB/s",
            "ratio to plain anyio file",
            "ratio to the all-core limit (reads)",
            "CPU-s/GB, process / loop thread",
            "of what its CPU allows",
            "page faults / context switches per GB",
        ],
    )
    plain, enc = tmp / "plain-file.bin", tmp / "enc-file.sc"
    cores = os.cpu_count() or 2

    def measured(variants: dict[str, Callable[[], object]]) -> dict[str, tuple[float, ...]]:
        """Median wall seconds, process CPU seconds, this thread's CPU seconds (the event
        loop's: run_uvloop runs it here), page faults and context switches (the process's,
        voluntary or not) of each variant, run in turn."""
        runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in variants}
        for r in range(rounds + 1):
            for name, fn in variants.items():
                u0 = resource.getrusage(resource.RUSAGE_SELF)
                t0, c0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
                fn()
                t, c, lt = (
                    time.perf_counter() - t0,
                    time.process_time() - c0,
                    time.thread_time() - l0,
                )
                u = resource.getrusage(resource.RUSAGE_SELF)
                if r:
                    switches = u.ru_nvcsw + u.ru_nivcsw - u0.ru_nvcsw - u0.ru_nivcsw
                    runs[name].append((t, c, lt, u.ru_minflt - u0.ru_minflt, switches))
        return {
            name: tuple(map(statistics.median, zip(*rs, strict=True))) for name, rs in runs.items()
        }

    def row(label: str, m: tuple[float, ...], base: float, limit: str) -> None:
        wall, cpu, loop, faults, switches = m
        t.add(
            label,
            size / wall / 1e9,
            f"{base / wall:.2f}x",
            limit,
            f"{cpu / size * 1e9:.2f} / {loop / size * 1e9:.3f}",
            f"{cpu / wall / cores:.2f}",
            f"{faults / size * 1e9:,.0f} / {switches / size * 1e9:,.0f}",
        )

    async def write_plain() -> None:
        part = tmp / ".plain.tmp"
        async with await anyio.open_file(part, "wb") as f:
            for _ in range(size // chunk):
                await f.write(block)
            await f.flush()
            await anyio.to_thread.run_sync(os.fsync, f.wrapped.fileno())
        await anyio.to_thread.run_sync(os.replace, part, plain)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            await anyio.to_thread.run_sync(os.fsync, fd)
        finally:
            os.close(fd)

    def write_enc(policy: sc.OffloadPolicy | None) -> Callable[[], object]:
        async def main() -> None:
            async with sc.open(enc, "wb", key=KEY, policy=policy) as f:
                for _ in range(size // chunk):
                    await f.write(block)

        return lambda: run_uvloop(main)

    async def read_plain() -> None:
        async with await anyio.open_file(plain, "rb") as f:
            while await f.read(chunk):
                pass

    def read_enc(policy: sc.OffloadPolicy | None) -> Callable[[], object]:
        async def main() -> None:
            async with sc.open(enc, "rb", key=KEY, policy=policy) as f:
                while await f.read(chunk):
                    pass

        return lambda: run_uvloop(main)

    w = measured(
        {
            "plain": lambda: run_uvloop(write_plain),
            "default": write_enc(DEFAULT_POLICY),
            "None": write_enc(None),
        }
    )
    for name in ("plain", "default", "None"):
        label = "plain anyio file" if name == "plain" else f"streamcrypt.open policy={name}"
        row(f"write, {label}", w[name], w["plain"][0], "")
    limits = Limits(block * 64, AESGCM(KEY))
    ceiling = _ReadCeiling(enc, limits)
    opening = _OpenKernel(limits)
    r = measured(
        {
            "plain": lambda: run_uvloop(read_plain),
            "default": read_enc(DEFAULT_POLICY),
            "None": read_enc(None),
            "limit": ceiling.run,
            "kernel": opening.run,
        }
    )
    # What the cores can do at best: each reads (at the plain read's speed) and opens (at
    # the kernel's) its share, perfectly overlapped; both speeds from this run.
    plain_rate, kernel_rate = size / r["plain"][0], opening.size / r["kernel"][0]
    two_core = limits.cores / (1 / plain_rate + 1 / kernel_rate)
    for name in ("plain", "default", "None", "limit"):
        if name == "limit":
            label = "limit: pread + AES-GCM on every core, no engine"
        elif name == "plain":
            label = "plain anyio file"
        else:
            label = f"streamcrypt.open policy={name}"
        rate = size / r[name][0]
        row(f"read, {label}", r[name], r["plain"][0], f"{rate / two_core:.2f}x")
    t.notes.append(
        "writes: temporary file, fsync, rename, fsync of the directory on both sides; reads "
        "from the page cache on both sides. Target (issue 11, again issue 28): >= 0.8x plain"
    )
    t.notes.append(
        f"AES-256-GCM opening 64 KiB segments on one thread in the same run: "
        f"{kernel_rate / 1e9:.2f} GB/s; plain read {plain_rate / 1e9:.2f} GB/s; the "
        f"{limits.cores}-core limit of an encrypted read, {limits.cores} / (1 / plain + "
        f"1 / kernel) (every core reads and opens its share, perfectly overlapped): "
        f"{two_core / 1e9:.2f} GB/s. The limit row reads 1 MiB pieces with pread on "
        f"{limits.cores} threads and seals each piece's 64 KiB segments, nothing else"
    )
    t.notes.append(
        "where a read's time goes: CPU-s/GB is the whole process's (every thread) and the "
        "event loop thread's alone (its Python between pieces holds the GIL the workers "
        "retake after every segment); 'of what its CPU allows' is CPU time over wall time "
        f"and {cores} cores, 1.00 when every core is busy the whole time: below that the "
        "threads waited (for work, or the GIL); the gap in CPU-s/GB to the limit row is "
        "what the engine costs beyond pread and AES. Page faults: new memory first touched; "
        "context switches: a thread that slept (for work, the GIL, a wake-up) or lost its "
        "core; the limit row's two threads hardly switch, the reader's three (loop and "
        "workers) hand the GIL over at every 64 KiB segment and wake each other per span"
    )


class _OpenKernel:
    """AES-256-GCM opening 64 KiB segments on one thread (what a read decrypts)."""

    def __init__(self, limits: Limits) -> None:
        kernel = limits.kernel
        assert isinstance(kernel, AESGCM)
        self.kernel = kernel
        self.sealed = kernel.encrypt(bytes(12), limits.view[:SEG], None)
        self.size = len(limits.view)
        self.out = bytearray(SEG)

    def run(self) -> None:
        open_, nonce, sealed, out = self.kernel.decrypt_into, bytes(12), self.sealed, self.out
        for _ in range(self.size // SEG):
            open_(nonce, sealed, None, out)


class _ReadCeiling:
    """What an encrypted read from the page cache can reach here: one thread per core,
    each reading its share of the file in 1 MiB ``pread`` calls and running AES-GCM over
    each piece's 64 KiB segments into a buffer of its own."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path
        self.limits = limits

    def _part(self, fd: int, offsets: list[int]) -> None:
        enc, nonce = self.limits.kernel.encrypt_into, bytes(12)
        out = memoryview(bytearray((1 << 20) + 16 * 16))
        for offset in offsets:
            piece = memoryview(os.pread(fd, 1 << 20, offset))
            for o in range(0, len(piece), SEG):
                segment = piece[o : o + SEG]
                enc(nonce, segment, None, out[o : o + len(segment) + 16])

    def run(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            offsets = list(range(0, os.fstat(fd).st_size, 1 << 20))
            cores = self.limits.cores
            list(
                self.limits.pool.map(
                    self._part, [fd] * cores, [offsets[i::cores] for i in range(cores)]
                )
            )
        finally:
            os.close(fd)


def _formats(report: Report, size: int, rounds: int) -> None:
    import pyrage

    from streamcrypt import decrypt, decrypt_bytes, encrypt

    data = os.urandom(size)
    chacha = Limits(data, ChaCha20Poly1305(KEY))
    aes = Limits(data, AESGCM(KEY))
    t = report.table(
        f"Formats through the async iterator (1 MiB chunks) against their peers, {size >> 20} "
        f"MiB (medians of {rounds}, interleaved)",
        ["format, direction", "streamcrypt GB/s", "peer GB/s", "vs peer", "vs limit (1 / all)"],
    )

    def line(
        label: str, limits: Limits, ours: Callable[[], object], peer: Callable[[], object]
    ) -> None:
        m = interleaved({"one": limits.one, "all": limits.all, "ours": ours, "peer": peer}, rounds)
        o, p = size / m["ours"], size / m["peer"]
        one, all_ = size / m["one"], size / m["all"]
        t.add(label, o / 1e9, p / 1e9, f"{o / p:.2f}x", f"{o / one:.2f}x / {o / all_:.2f}x")

    ident = pyrage.x25519.Identity.generate()
    recipient = str(ident.to_public())
    age_ct = pyrage.encrypt(data, [ident.to_public()])
    line(
        "age encrypt (pyrage)",
        chacha,
        _drain(lambda: encrypt(_gen(data, 1 << 20)(), format="age", recipients=[recipient])),
        lambda: pyrage.encrypt(data, [ident.to_public()]),
    )
    line(
        "age decrypt (pyrage)",
        chacha,
        _drain(lambda: decrypt(_gen(age_ct, 1 << 20)(), format="age", identities=[str(ident)])),
        lambda: pyrage.decrypt(age_ct, [ident]),
    )
    assert decrypt_bytes(age_ct, identities=[str(ident)], policy=None) == data

    tink_peer = TinkPeer()
    tink_ct = tink_peer.encrypt(data)
    line(
        "Tink AES256_GCM_HKDF_1MB encrypt (tink)",
        aes,
        _drain(lambda: encrypt(_gen(data, 1 << 20)(), tink_peer.key, format="tink")),
        lambda: tink_peer.encrypt(data),
    )
    line(
        "Tink AES256_GCM_HKDF_1MB decrypt (tink)",
        aes,
        _drain(lambda: decrypt(_gen(tink_ct, 1 << 20)(), tink_peer.keyset, format="tink")),
        lambda: tink_peer.decrypt(tink_ct),
    )
    c2sp_peer = CobblestonePeer(1 << 20)
    key = c2sp_peer.key
    c2sp = c2sp_peer.encrypt(data)
    line(
        "C2SP Cobblestone-256 encrypt (cryptography)",
        aes,
        _drain(lambda: encrypt(_gen(data, 1 << 20)(), key, format="cobblestone")),
        lambda: c2sp_peer.encrypt(data),
    )
    line(
        "C2SP Cobblestone-256 decrypt (cryptography)",
        aes,
        _drain(lambda: decrypt(_gen(c2sp, 1 << 20)(), key, format="cobblestone")),
        lambda: c2sp_peer.decrypt(c2sp),
    )
    t.notes.append(
        "targets (issue 11): age decrypt >= 0.8x its all-cores limit (ChaCha20-Poly1305); C2SP "
        ">= 2x cryptography.cobblestone both ways; Tink decrypt >= 1.5x tink"
    )


def _soak_child(total: int) -> None:
    """In a fresh process: stream ``total`` bytes through encrypt() from a 1 MiB generator,
    with a 1 ms ticker; print p50 and p99 ticker oversleep (ms) and peak RSS growth (MiB)."""
    _as_an_application()
    chunk = os.urandom(1 << 20)

    async def source() -> AsyncIterator[bytes]:
        for _ in range(total >> 20):
            yield chunk

    async def stream() -> None:
        n = 0
        async for piece in sc.decrypt(sc.encrypt(source(), KEY), KEY):
            n += len(piece)
        assert n == total

    async def main() -> tuple[float, float]:
        return await ticker_lags(stream)

    base = proc_status("VmRSS:")
    p50, p99 = run_uvloop(main)
    print(f"{p50} {p99} {(proc_status('VmHWM:') - base) / (1 << 20)}")


def _soak(report: Report, total: int) -> None:
    t = report.table(
        f"{total >> 30} GiB through encrypt() then decrypt() (1 MiB generator, default policy)",
        ["loop lag p50 (ms)", "loop lag p99 (ms)", "peak RSS growth (MiB)"],
    )
    out = subprocess.run(
        [sys.executable, "-c", f"from bench.paths import _soak_child; _soak_child({total})"],
        capture_output=True,
        text=True,
        check=True,
    )
    p50, p99, rss = (float(x) for x in out.stdout.split())
    t.add(p50, p99, rss)
    t.notes.append("targets (issue 11): lag p99 <= 5 ms; peak RSS growth <= 64 MiB for 4 GiB")


def _first_stream_child(size: int, policy_name: str, path: str = "") -> None:
    """In a fresh process: the first ``size``-byte stream through ``encrypt()`` from a 1 MiB
    async generator under ``policy_name`` ("default" or "None"), or with ``path`` the
    first read of that encrypted file in 1 MiB reads; prints its seconds.

    The imports and the loop are warmed first by a 64 KiB stream (or a 64 KiB file,
    ``path + ".small"``) under the same policy (too short to reach any measurement of the
    adaptive policy), so the figure is the policy's cold start, not the interpreter's."""
    _as_an_application()
    policy = POLICIES[policy_name]

    async def drain(source: AsyncIterator[bytes]) -> int:
        n = 0
        async for piece in sc.encrypt(source, KEY, policy=policy):
            n += len(piece)
        return n

    async def read(name: str) -> None:
        async with sc.open(name, "rb", key=KEY, policy=policy) as f:
            while await f.read(1 << 20):
                pass

    async def main() -> float:
        if path:
            await read(path + ".small")
        else:
            data = os.urandom(size)
            await drain(_gen(data[: 64 << 10], 64 << 10)())
        t0 = time.perf_counter()
        if path:
            await read(path)
        else:
            await drain(_gen(data, 1 << 20)())
        return time.perf_counter() - t0

    print(run_uvloop(main))


def _first_stream(report: Report, size: int, runs: int, tmp: Path) -> None:
    t = report.table(
        f"First stream of a fresh process, {size >> 20} MiB: encrypt() from a 1 MiB async "
        "generator, and streamcrypt.open of an encrypted file read in 1 MiB reads from the "
        f"page cache, AES-256-GCM (medians of {runs}, each run a new process per variant)",
        ["stream", "policy", "GB/s", "vs policy=None", "kernel GB/s (1 thread, same run)"],
    )
    limits = Limits(os.urandom(64 << 20), AESGCM(KEY))
    path = tmp / "first.sc"

    async def write(name: Path, length: int) -> None:
        async with sc.open(name, "wb", key=KEY) as f:
            for off in range(0, length, 64 << 20):
                await f.write(limits.view[: min(64 << 20, length - off)])

    run_uvloop(lambda: write(path, size))
    run_uvloop(lambda: write(Path(f"{path}.small"), 64 << 10))
    streams = {"encrypt()": "", "open(..., 'rb')": str(path)}
    times: dict[tuple[str, str], list[float]] = {
        (stream, name): [] for stream in streams for name in ("default", "None")
    }
    kernel: list[float] = []
    for _ in range(runs):
        for stream, name in times:
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    f"from bench.paths import _first_stream_child; "
                    f"_first_stream_child({size}, {name!r}, {streams[stream]!r})",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            times[stream, name].append(float(out.stdout))
        t0 = time.perf_counter()
        limits.one()
        kernel.append(len(limits.view) / (time.perf_counter() - t0))
    rate = {key: size / statistics.median(ts) for key, ts in times.items()}
    k = statistics.median(kernel) / 1e9
    for stream, name in times:
        ratio = rate[stream, name] / rate[stream, "None"]
        t.add(stream, name, rate[stream, name] / 1e9, f"{ratio:.2f}x", k)
    t.notes.append(
        "imports warmed by a 64 KiB stream (or file) first in each process; target (issue "
        "28): default >= 0.95x policy=None"
    )


def _as_an_application() -> None:
    """Opt in to glibc keeping freed memory, as an application that turns over large
    buffers would (docs/ENGINE.md): the library did this itself until issue 27 #14, so
    rows measured before that are like for like only with it."""
    keep_freed_memory()


def run(report: Report, quick: bool = False) -> None:
    rounds = 3 if quick else 5
    _as_an_application()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        tmp = Path(d)
        _iterators(report, (128 if quick else 512) << 20, rounds, tmp)
        _one_shot(report, [1 << 20, 64 << 20] + ([] if quick else [256 << 20]), rounds)
        _files(report, (256 if quick else 1024) << 20, 3, tmp)
        _first_stream(report, 256 << 20, 3 if quick else 5, tmp)
    _formats(report, (64 if quick else 256) << 20, rounds)
    _age_plugin(report, rounds)
    run_messages(report, quick)
    _soak(report, (1 if quick else 4) << 30)


def run_files(report: Report, quick: bool = False) -> None:
    """The file table alone, as ``run`` measures it (``python -m bench files [--quick]``,
    run by itself: it opts the process in to keep_freed_memory, as ``run`` does)."""
    _as_an_application()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        _files(report, (256 if quick else 1024) << 20, 3, Path(d))


# ---------------------------------------------------------------------------------------
# Issue 30: the per-file cost of an age plugin recipient
# ---------------------------------------------------------------------------------------


def _age_plugin(report: Report, rounds: int, files: int = 10) -> None:
    """A 1 KiB age file to a plugin recipient and back (age-plugin-pkcs11 with the tests'
    software token key: a process started and one exchange per file) against an X25519
    recipient, in this process through ``streamcrypt.encrypt_bytes`` / ``decrypt_bytes``."""
    from streamcrypt.cli._age_plugin_pkcs11 import identity_for, recipient_for
    from streamcrypt.codecs.age import X25519Identity

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import soft_pkcs11

    uri = "pkcs11:token=soft;object=bench"
    x25519 = X25519Identity.generate()
    keys = {
        "X25519": (x25519.recipient, x25519),
        "plugin (age-plugin-pkcs11)": (recipient_for(uri), identity_for(uri)),
    }
    data = os.urandom(1024)
    t = report.table(
        f"age, per file: a plugin recipient against X25519 (1 KiB files, ms per file, "
        f"medians of {rounds} interleaved rounds of {files})",
        ["recipient", "encrypt ms", "decrypt ms", "encrypt vs X25519", "decrypt vs X25519"],
    )
    with tempfile.TemporaryDirectory(prefix="bench-age-plugin-") as d:
        soft_pkcs11.write_plugin(d)
        path = os.environ["PATH"]
        os.environ["PATH"] = d + os.pathsep + path
        try:
            sealed = {
                n: sc.encrypt_bytes(data, format="age", recipients=r) for n, (r, _) in keys.items()
            }
            variants: dict[str, Callable[[], object]] = {}
            for name, (recipient, identity) in keys.items():
                variants[f"{name} encrypt"] = lambda r=recipient: [
                    sc.encrypt_bytes(data, format="age", recipients=r) for _ in range(files)
                ]
                variants[f"{name} decrypt"] = lambda i=identity, c=sealed[name]: [
                    sc.decrypt_bytes(c, format="age", identities=i) for _ in range(files)
                ]
            medians = interleaved(variants, rounds)
        finally:
            os.environ["PATH"] = path
    base_enc, base_dec = medians["X25519 encrypt"], medians["X25519 decrypt"]
    for name in keys:
        enc, dec = medians[f"{name} encrypt"], medians[f"{name} decrypt"]
        t.add(
            name,
            enc / files * 1e3,
            dec / files * 1e3,
            f"{enc / base_enc:.0f}x",
            f"{dec / base_dec:.0f}x",
        )
    t.notes.append(
        "the plugin is a Python program: its start-up (the interpreter and streamcrypt's "
        "imports) is most of its cost; a plugin in Go or Rust starts in a few ms"
    )


# ---------------------------------------------------------------------------------------
# Issue 28: per-message and per-segment cost (small messages; Python per segment)
# ---------------------------------------------------------------------------------------

MESSAGE_SIZES = [64, 1 << 10, 16 << 10]


#: A way to encrypt one message, and to decrypt it.
Pair = tuple[Callable[[bytes], bytes], Callable[[bytes], object]]


def _message_peers(key: bytes) -> dict[str, Pair]:
    """Each small-message peer installed here: (encrypt, decrypt) of one message."""
    from cryptography.fernet import Fernet

    aes = AESGCM(key)

    def aes_seal(m: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + aes.encrypt(nonce, m, None)

    fernet = Fernet(Fernet.generate_key())
    peers: dict[str, Pair] = {
        "AESGCM, random nonce": (aes_seal, lambda c: aes.decrypt(c[:12], c[12:], None)),
        "Fernet": (fernet.encrypt, fernet.decrypt),
    }
    try:
        from nacl.secret import SecretBox
    except ImportError:  # pragma: no cover - a test extra
        pass
    else:
        box = SecretBox(key)
        peers["PyNaCl SecretBox"] = (box.encrypt, box.decrypt)
    try:
        import tink
        from tink import aead
    except ImportError:  # pragma: no cover - a test extra
        pass
    else:
        aead.register()
        handle = tink.new_keyset_handle(aead.aead_key_templates.AES256_GCM)
        primitive = handle.primitive(aead.Aead)
        peers["Tink AEAD (AES256_GCM)"] = (
            lambda m: primitive.encrypt(m, b""),
            lambda c: primitive.decrypt(c, b""),
        )
    try:
        import pyrage
    except ImportError:  # pragma: no cover - a test extra
        pass
    else:
        ident = pyrage.x25519.Identity.generate()
        recipient = ident.to_public()
        peers["pyrage (age, X25519)"] = (
            lambda m: pyrage.encrypt(m, [recipient]),
            lambda c: pyrage.decrypt(c, [ident]),
        )
    return peers


def _cpu_interleaved(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """As :func:`interleaved`, in this thread's CPU seconds: a variant of a few ms is
    otherwise timed by whether it fits in one time slice of a loaded VM."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds + 1):
        for name, fn in variants.items():
            t0 = time.thread_time()
            fn()
            if r:
                times[name].append(time.thread_time() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _per_call(fn: Callable[[bytes], object], arg: bytes, n: int) -> Callable[[], object]:
    def run() -> None:
        for _ in range(n):
            fn(arg)

    return run


def _format_floor(key: bytes) -> Pair:
    """The native calls a one-segment native container message cannot do without, and
    nothing else: the randomness, the two HMAC-SHA256 of the key schedule (segment key,
    header tag), the AES-256-GCM key schedule and the seal (docs/FORMAT.md, "Keys"), by
    the fastest calls measured: both HMACs are keyed by the master key alone, so its HMAC
    context is keyed once per key and copied per message (``cryptography``'s ``HMAC``:
    two for 1.6 us, where two fresh contexts take 2.4 through the private
    ``_hashlib.hmac_new``). Its messages are checked to decrypt with
    ``streamcrypt.decrypt_bytes``: the same work, without the library around it. The
    decrypt side does the same less the randomness."""
    import hmac as _hmac
    import struct

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.hmac import HMAC

    fixed = struct.Struct(">4sBBI").pack(b"SCRY", 1, 1, 65536)
    keyed = HMAC(key, hashes.SHA256())  # per key, never updated: each message copies it
    seg_label = b"streamcrypt container v1 segment key"
    tag_label = b"streamcrypt container v1 header tag"

    def keys(body: bytes) -> tuple[bytes, bytes]:
        seg, tag = keyed.copy(), keyed.copy()
        seg.update(seg_label + body + b"\x01")
        tag.update(tag_label + body)
        return seg.finalize(), tag.finalize()

    def seal(m: bytes) -> bytes:
        fresh = os.urandom(39)
        body = fixed + fresh + b"\0"
        seg_key, tag = keys(body)
        return body + tag + AESGCM(seg_key).encrypt(fresh[32:] + b"\0\0\0\0\1", m, None)

    def open_(c: bytes) -> bytes:
        body = c[:50]
        seg_key, tag = keys(body)
        if not _hmac.compare_digest(tag, c[50:82]):
            raise ValueError("header tag")
        return AESGCM(seg_key).decrypt(c[42:49] + b"\0\0\0\0\1", c[82:], None)

    return seal, open_


def _messages(report: Report, rounds: int) -> None:
    """Microseconds per message, streamcrypt's one-shot calls against the peers installed
    and the native calls the format needs (its floor)."""
    key = bytes(range(32))
    secret = sc.keys.SecretKey(key)
    floor = _format_floor(key)
    assert sc.decrypt_bytes(floor[0](b"m"), key) == b"m"
    peers: dict[str, Pair] = {
        "streamcrypt (native)": (
            lambda m: sc.encrypt_bytes(m, secret),
            lambda c: sc.decrypt_bytes(c, secret),
        ),
        "streamcrypt, bytes key": (
            lambda m: sc.encrypt_bytes(m, key),
            lambda c: sc.decrypt_bytes(c, key),
        ),
        "format floor (native calls only)": floor,
        **_message_peers(key),
    }
    names = list(peers)
    t = report.table(
        f"Small messages: CPU microseconds per message (medians of {rounds} rounds, interleaved)",
        ["size, direction", *names, "streamcrypt less the floor (its Python)"],
    )
    for size in MESSAGE_SIZES:
        data = os.urandom(size)
        n = max(50, (2 << 20) // (size + 4096))  # about 10-20 ms a variant and round
        for verb in (0, 1):
            variants: dict[str, Callable[[], object]] = {}
            for name, pair in peers.items():
                arg = data if verb == 0 else pair[0](data)
                assert verb == 0 or pair[1](arg) == data
                variants[name] = _per_call(pair[verb], arg, n)
            m = _cpu_interleaved(variants, rounds)
            label = f"{size if size < 1024 else f'{size >> 10} Ki'}B {('encrypt', 'decrypt')[verb]}"
            python = (m["streamcrypt (native)"] - m["format floor (native calls only)"]) / n
            t.add(label, *(f"{m[name] / n * 1e6:.1f}" for name in names), f"{python * 1e6:.1f}")
    t.notes.append(
        "targets (issue 28): encrypt_bytes / decrypt_bytes of 1 KiB <= 5 us, below Fernet. "
        "Each peer as it is used for a message: AESGCM and SecretBox draw a random nonce, "
        "Fernet and pyrage (one X25519 recipient) write their own envelope. The format "
        "floor is the native container's own work with no Python around it (randomness, "
        "two HMAC-SHA256 from a context keyed once per key, an AES key schedule, the seal; "
        "docs/FORMAT.md): what no implementation of the format in Python can go below on "
        "this machine. streamcrypt keeps that context in a SecretKey (the first column); "
        "a bare bytes key keys it per message (the second)"
    )


#: A format of the per-segment table: its name, its kernel (the format's own AEAD over
#: the same segment size), and the keyword arguments ``encrypt()`` / ``decrypt()`` take.
SegmentedCase = tuple[str, AESGCM | ChaCha20Poly1305, dict[str, Any], dict[str, Any]]


def _segment_cases() -> list[SegmentedCase]:
    """Every format with a segment codec, each on 64 KiB segments (age's fixed chunk
    size; the others' ``segment_size=`` or key parameters), each under its own AEAD."""
    from streamcrypt.codecs import aws
    from streamcrypt.codecs.age import X25519Identity
    from streamcrypt.codecs.tink import AesGcmHkdfStreamingParams, TinkStreamingKey

    age_id = X25519Identity.generate()
    ring = aws.RawAesKeyring("bench", "key", KEY)
    tink_key = TinkStreamingKey.generate(
        AesGcmHkdfStreamingParams(32, SEG + 16)  # the tag beside 64 KiB of plaintext
    )
    return [
        ("native", AESGCM(KEY), {"key": KEY}, {"key": KEY}),
        (
            "age",
            ChaCha20Poly1305(KEY),
            {"format": "age", "recipients": [age_id.recipient]},
            {"format": "age", "identities": [age_id]},
        ),
        (
            "RFC 8188",
            AESGCM(KEY[:16]),
            {"format": "ece", "key": KEY[:16], "segment_size": SEG},
            {"format": "ece", "key": KEY[:16]},
        ),
        (
            "AWS 0x0478",
            AESGCM(KEY),
            {"format": "aws", "key": ring, "suite": "0x0478", "segment_size": SEG},
            {"format": "aws", "key": ring},
        ),
        (
            "Tink",
            AESGCM(KEY),
            {"format": "tink", "key": tink_key},
            {"format": "tink", "key": tink_key},
        ),
    ]


#: Plaintext bytes per output object of the iterator paths: the engine hands out its
#: output in new objects of about 512 KiB, or one per chunk below that (docs/ENGINE.md,
#: "Output memory"); the limit of the per-segment table pays for new memory in the same
#: pieces.
OUTPUT_PIECE = 512 << 10


class _Fresh:
    """What new output memory costs a path: each source chunk (sliced as the source
    slices it) sealed in pieces of the path's output size, one call of the format's AEAD
    a piece, into new objects kept until the chunk's are all made (``fresh``) or into
    one reused buffer (``recycled``). The difference is the new memory alone: its
    allocation, first touch and free, in the path's own pattern."""

    def __init__(
        self, data: bytes, chunk: int, piece: int, kernel: AESGCM | ChaCha20Poly1305
    ) -> None:
        self.data, self.chunk, self.piece, self.kernel = data, chunk, piece, kernel
        self.buf = memoryview(bytearray(self.piece + 16))

    def fresh(self) -> None:
        data, chunk, piece, seal = self.data, self.chunk, self.piece, self.kernel.encrypt
        nonce = bytes(12)
        for off in range(0, len(data), chunk):
            view = memoryview(data[off : off + chunk] if chunk < len(data) else data)
            kept = [seal(nonce, view[p : p + piece], None) for p in range(0, len(view), piece)]
            del kept

    def recycled(self) -> None:
        data, chunk, piece, seal = self.data, self.chunk, self.piece, self.kernel.encrypt_into
        nonce, buf = bytes(12), self.buf
        for off in range(0, len(data), chunk):
            view = memoryview(data[off : off + chunk] if chunk < len(data) else data)
            for p in range(0, len(view), piece):
                seal(nonce, view[p : p + piece], None, buf)


def _kernel_into(data: bytes, kernel: AESGCM | ChaCha20Poly1305) -> Callable[[], object]:
    """The format's AEAD over 64 KiB segments into one reused buffer: the kernel alone."""
    view, out = memoryview(data), memoryview(bytearray(SEG + 16))
    seal, nonce = kernel.encrypt_into, bytes(12)

    def run() -> None:
        for off in range(0, len(view), SEG):
            seal(nonce, view[off : off + SEG], None, out)

    return run


def _segment_rows(name: str, size: int, rounds: int) -> list[dict[str, Any]]:
    """The per-segment rows of one format (``_segment_cases``' name), measured in this
    process: each row's label, CPU seconds of the path, its kernel, new memory and source
    (medians, interleaved), and the path's page faults per GB (median)."""
    import resource

    data = os.urandom(size)
    _, kernel, enc, dec = next(case for case in _segment_cases() if case[0] == name)
    ct = sc.encrypt_bytes(data, policy=None, **enc)
    rows: list[tuple[str, int, Callable[[], object], Callable[[], object]]] = []
    for chunk in (64 << 10, 1 << 20):
        label = f"{chunk >> 10} KiB chunks" if chunk < (1 << 20) else "1 MiB chunks"
        plain, cipher = _gen(data, chunk), _gen(ct, chunk)
        rows.append(
            (
                f"encrypt(), {label}",
                chunk,
                _drain(lambda p=plain: sc.encrypt(p(), policy=None, **enc)),
                _drain(plain),
            )
        )
        rows.append(
            (
                f"decrypt(), {label}",
                chunk,
                _drain(lambda c=cipher: sc.decrypt(c(), policy=None, **dec)),
                _drain(cipher),
            )
        )
    if name == "native":
        rows.append(
            ("encrypt_bytes", size, lambda: sc.encrypt_bytes(data, KEY, policy=None), lambda: None)
        )
        rows.append(
            ("decrypt_bytes", size, lambda: sc.decrypt_bytes(ct, KEY, policy=None), lambda: None)
        )
    out: list[dict[str, Any]] = []
    for label, chunk, path, source in rows:
        faults: list[int] = []

        def counted(path: Callable[[], object] = path) -> None:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            path()
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

        # A one-shot call writes one object of the whole size.
        memory = _Fresh(data, chunk, min(chunk, OUTPUT_PIECE) if chunk < size else size, kernel)
        m = _cpu_interleaved(
            {
                "kernel": _kernel_into(data, kernel),
                "fresh": memory.fresh,
                "recycled": memory.recycled,
                "path": counted,
                "source": source,
            },
            rounds,
        )
        out.append(
            {
                "label": label,
                "path": m["path"],
                "kernel": m["kernel"],
                "new_memory": max(0.0, m["fresh"] - m["recycled"]),
                "source": m["source"],
                "faults_per_gb": statistics.median(faults[1:]) / (size / 1e9),
            }
        )
    return out


def _segment_child(name: str, size: int, rounds: int) -> None:
    """In a fresh process that never calls ``keep_freed_memory()`` (what a library user
    gets): :func:`_segment_rows` of one format, as JSON."""
    import json

    print(json.dumps(_segment_rows(name, size, rounds)))


def _per_segment(report: Report, size: int, rounds: int) -> None:
    """Python per 64 KiB segment of every segmented format, inline (``policy=None``): the
    path's time less its limit (the format's AEAD on one thread over the same segments,
    the new memory its output needs, and the source), over the segments; as an
    application that called ``keep_freed_memory()`` (this process) and as a library user
    who did not (a fresh child process per format, glibc's defaults)."""
    import json

    segments = -(-size // SEG)
    t = report.table(
        f"Python per 64 KiB segment, {size >> 20} MiB inline (policy=None; CPU time, "
        f"medians of {rounds}, interleaved)",
        [
            "format, path",
            "path ms",
            "kernel ms",
            "new memory ms",
            "source ms",
            "Python us / segment",
            "path / limit",
            "kernel GB/s",
            "default allocator: Python us / segment",
            "page faults / GB (kept / default)",
        ],
    )

    def python_per_segment(row: dict[str, Any]) -> float:
        limit = row["kernel"] + row["new_memory"] + row["source"]
        return float(row["path"] - limit) / segments * 1e6

    for name, *_ in _segment_cases():
        kept = _segment_rows(name, size, rounds)
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from bench.paths import _segment_child; _segment_child({name!r}, {size}, {rounds})",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        default = {row["label"]: row for row in json.loads(child.stdout)}
        for row in kept:
            other = default[row["label"]]
            limit = row["kernel"] + row["new_memory"] + row["source"]
            t.add(
                f"{name} {row['label']}",
                f"{row['path'] * 1e3:.1f}",
                f"{row['kernel'] * 1e3:.1f}",
                f"{row['new_memory'] * 1e3:.1f}",
                f"{row['source'] * 1e3:.1f}",
                f"{python_per_segment(row):.2f}",
                f"{row['path'] / limit:.2f}x",
                f"{size / row['kernel'] / 1e9:.2f}",
                f"{python_per_segment(other):.2f}",
                f"{row['faults_per_gb']:.0f} / {other['faults_per_gb']:.0f}",
            )
    t.notes.append(
        "targets (issue 28): <= 1 us of Python per segment for the native container, <= 2 us "
        "for the framed formats. Python per segment = (path - limit) / segments, in CPU time "
        "of the one thread all of it runs on; the limit is what the path cannot avoid: the "
        "kernel (the format's AEAD: AES-256-GCM; AES-128-GCM for RFC 8188; "
        "ChaCha20-Poly1305 for age; over the same 64 KiB segments into one reused buffer, "
        "decrypt's taken as encrypt's), the new memory its output takes (the outputs a user "
        "keeps are new objects: each chunk sealed in the path's output pieces, min(chunk, "
        "512 KiB), one AEAD call a piece, into new objects less the same into a reused "
        "buffer; one object of the whole for the one-shot calls) and the source (the bare "
        "generator; its slices copy). Copies a path makes beyond that (a segment that "
        "straddles two chunks is joined; an RFC 8188 record is laid out beside its "
        "delimiter) count as its Python. AWS runs the unsigned committing suite 0x0478 "
        "(0x0578 adds an ECDSA signature over a SHA-384 of the message, not per-segment work)"
    )
    t.notes.append(
        "'Python us / segment' and the first page-fault figure: this process, which called "
        "keep_freed_memory() as an application would; 'default allocator' and the second: "
        "the same rows in a fresh process per format that did not (what a library user gets: "
        "glibc's dynamic thresholds, which trim and regrow the heap in some processes' "
        "layouts; docs/ENGINE.md, 'Output memory'). Page faults of the path per GB of "
        "plaintext, median of the rounds"
    )


def run_messages(report: Report, quick: bool = False) -> None:
    """This section alone: ``python -c 'from bench.paths import ...'`` or within ``run``."""
    rounds = 5 if quick else 9
    _messages(report, rounds)
    _per_segment(report, (64 if quick else 256) << 20, 3 if quick else 5)
