"""streamcrypt.cluster on a local Dask cluster: what a task costs, what a worker does.

Throughput of encrypting the same set of files in one process (the same per-object code,
no scheduler), on 1 and on 2 worker processes, and of one object by ranges; the
scheduler's cost per task (a round trip, and tasks in bulk); the cost of one empty object
end to end. docs/CLUSTER.md builds its scaling model from these figures.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster

from streamcrypt import cluster
from streamcrypt.cluster._objects import CryptOptions, ObjectSpec, process_object

from ._report import Report, gbps

KEY_VAR = "STREAMCRYPT_BENCH_KEY"


def _noop(x: int) -> int:
    return x


def _cluster(workers: int) -> LocalCluster:
    return LocalCluster(
        n_workers=workers,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=":0",  # None means the fixed 8787, taken by a second run
        silence_logs=40,
    )


def _files(root: Path, count: int, size: int) -> int:
    root.mkdir(parents=True, exist_ok=True)
    block = os.urandom(1 << 20)
    for i in range(count):
        with (root / f"obj{i:04d}").open("wb") as f:
            for _ in range(size >> 20):
                f.write(block)
    return count * size


def _best(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(report: Report, quick: bool = False) -> None:
    os.environ.setdefault(KEY_VAR, os.urandom(32).hex())  # the workers inherit it
    key = cluster.EnvKey(KEY_VAR)
    count, size = (8, 16 << 20) if quick else (16, 64 << 20)
    rounds = 2 if quick else 3
    with tempfile.TemporaryDirectory(prefix="sc-bench-cluster-") as tmp:
        root = Path(tmp)
        total = _files(root / "src", count, size)
        big = root / "big"
        _files(big, 1, total)
        t = report.table(
            f"cluster: encrypt {count} objects of {size >> 20} MiB (AES-256-GCM, local disk)",
            ["run", "workers", "tasks", "seconds", "GB/s"],
        )
        spec = ObjectSpec("encrypt", key, None, CryptOptions(), "00000000")
        pairs = [(str(p), str(root / "one" / p.name), size) for p in (root / "src").iterdir()]

        def one_process() -> None:
            for pair in pairs:
                process_object(pair, spec)

        secs = _best(one_process, rounds)
        t.add("one process, engine (no scheduler)", 0, count, secs, gbps(total, secs))
        per_worker: dict[int, float] = {}
        for workers in (1, 2):
            with _cluster(workers) as lc, Client(lc) as client:
                client.run(_noop, 0)
                src, dst = str(root / "src"), str(root / f"enc{workers}")

                def objects() -> None:
                    assert cluster.encrypt_objects(client, src, dst, key).ok

                secs = _best(objects, rounds)
                per_worker[workers] = gbps(total, secs) / workers
                t.add("encrypt_objects", workers, count, secs, gbps(total, secs))
                if workers == 2:
                    ranges_src, ranges_dst = str(big / "obj0000"), str(root / "big.sc")
                    tasks = 0

                    def ranges() -> None:
                        nonlocal tasks
                        s = cluster.encrypt_ranges(client, ranges_src, ranges_dst, key)
                        assert s.ok
                        tasks = s.tasks

                    secs = _best(ranges, rounds)
                    t.add("encrypt_ranges, one object", workers, tasks, secs, gbps(total, secs))
                    _overhead(report, client, root, key, quick)
        t.notes.append(
            "per-worker throughput: "
            + ", ".join(f"{w} worker(s) {v:.3g} GB/s each" for w, v in per_worker.items())
            + f"; the machine has {os.cpu_count()} cores shared with other jobs"
        )


def _overhead(report: Report, client: Client, root: Path, key: cluster.EnvKey, quick: bool) -> None:
    t = report.table(
        "cluster: scheduler cost per task (2 workers, loopback)", ["what", "n", "ms per task"]
    )
    rtt = []
    for i in range(30 if quick else 100):
        t0 = time.perf_counter()
        client.submit(_noop, i, pure=False).result()
        rtt.append(time.perf_counter() - t0)
    t.add("submit + result, one at a time (round trip)", len(rtt), statistics.median(rtt) * 1e3)
    n = 500 if quick else 2000
    t0 = time.perf_counter()
    client.gather(client.map(_noop, range(n), pure=False))
    t.add("map + gather of no-op tasks (in bulk)", n, (time.perf_counter() - t0) / n * 1e3)
    empty = root / "empty"
    empty.mkdir()
    m = 100 if quick else 400
    for i in range(m):
        (empty / f"e{i:04d}").write_bytes(b"")
    t0 = time.perf_counter()
    assert cluster.encrypt_objects(client, str(empty), str(root / "empty.sc"), key).ok
    t.add(
        "encrypt_objects of empty objects (list, open, commit)",
        m,
        (time.perf_counter() - t0) / m * 1e3,
    )
