"""The engine's own costs, from which the OffloadPolicy defaults are chosen.

A thread hop as the engine does it, on each backend; throughput and peak memory by
batch size. Re-run after changing engine/_offload.py and update the comments there.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import anyio
import uvloop

import streamcrypt as sc
from streamcrypt.codecs.container import StreamEncryptor
from streamcrypt.engine import DEFAULT_POLICY, wait_future

from ._report import Report, gbps, median_time, proc_status, run_uvloop

KEY = bytes(32)
BACKENDS = [
    ("asyncio", {}),
    ("uvloop", {"backend_options": {"loop_factory": uvloop.new_event_loop}}),
    ("trio", {"backend": "trio"}),
]


async def _hops(n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await wait_future(DEFAULT_POLICY.submit(int))
        times.append(time.perf_counter() - t0)
    return times


async def _to_thread_hops(n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await anyio.to_thread.run_sync(int)
        times.append(time.perf_counter() - t0)
    return times


def _rss_child(batch: int, window: int, total: int) -> None:
    """In a fresh process: peak RSS growth (bytes) of encrypt | decrypt over ``total`` bytes."""

    policy = sc.OffloadPolicy(batch_size=batch, max_in_flight=window)
    chunk = os.urandom(1 << 20)

    async def source():  # type: ignore[no-untyped-def]
        for _ in range(total >> 20):
            yield chunk

    async def main() -> None:
        async for _ in sc.decrypt(sc.encrypt(source(), KEY, policy=policy), KEY, policy=policy):
            pass

    base = proc_status("VmRSS:")
    run_uvloop(main)
    print(proc_status("VmHWM:") - base)


def run(report: Report, quick: bool = False) -> None:
    n = 500 if quick else 3000
    hops = report.table(
        "Thread hop cost (us): submit to a worker, wake the loop",
        ["backend", "engine hop p50", "engine hop p90", "anyio.to_thread p50"],
    )
    for name, kw in BACKENDS:
        ours = sorted(anyio.run(_hops, n, **kw))  # type: ignore[arg-type]
        theirs = sorted(anyio.run(_to_thread_hops, n, **kw))  # type: ignore[arg-type]
        hops.add(
            name,
            statistics.median(ours) * 1e6,
            ours[int(n * 0.9)] * 1e6,
            statistics.median(theirs) * 1e6,
        )

    size = (128 if quick else 512) << 20
    data = os.urandom(size)
    sweep = report.table(
        f"Batch size: encrypt {size >> 20} MiB into a sink (GB/s), and peak RSS of encrypt | decrypt",
        ["batch", "window", "AES-256-GCM", "ChaCha20-Poly1305", "peak RSS growth (MiB)"],
    )

    async def discard(view: memoryview) -> None:
        return None

    for batch in (2 << 20, 4 << 20, 8 << 20):
        policy = sc.OffloadPolicy(batch_size=batch)
        speeds = []
        for suite in ("aes-256-gcm", "chacha20-poly1305"):

            def once(suite: str = suite, policy: sc.OffloadPolicy = policy) -> None:
                async def main() -> None:
                    await sc.pipeline(StreamEncryptor(KEY, suite=suite), policy=policy).run(
                        data, discard
                    )

                anyio.run(main, backend_options={"loop_factory": uvloop.new_event_loop})

            speeds.append(gbps(size, median_time(once, 3 if quick else 5)))
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from bench.engine import _rss_child; _rss_child({batch}, {policy.max_in_flight}, {512 << 20})",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        sweep.add(f"{batch >> 20} MiB", policy.max_in_flight, *speeds, int(out.stdout) / (1 << 20))
    sweep.notes.append("defaults: see streamcrypt/engine/_offload.py")
