"""Chunked backups against restic, on the same generated tree, in one sitting.

The tree: ~100 MB in ~4,000 files (mostly small text and binary files, some medium, a few
large; about half of the bytes compressible). Each repetition, for each tool in turn (the
order alternates): a first backup into a new store, the store's size, a second backup
after a small edit and one added file, a restore of the second snapshot into a new
directory. Both tools run as commands (``streamcrypt backup``, ``restic``), so
both pay their start-up. Then, on a tree of one large file, the bytes each store grows
by per 16-byte edit (median over edits at spread offsets: dedup).

streamcrypt runs with bytecode caching allowed, as an installed wheel runs (the rule of
bench/cli.py: ``PYTHONDONTWRITEBYTECODE`` is dropped for the children, and one untimed
round of every command first writes the caches), so start-up is what users pay, not a
compile of every module on every run.

restic comes from Debian (``apt-get install restic``); without it, its rows say so and
only streamcrypt's figures are given. restic opens a repository with a password through
scrypt on every command (the "open" row); streamcrypt reads a raw key file.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ._report import Report
from .cli import _env

#: ``streamcrypt backup``, from the checkout this runs in.
COMMAND = (sys.executable, "-m", "streamcrypt", "backup")
PASSWORD = "bench-password"
_WORDS = (
    "stream crypt backup chunk pack index manifest snapshot restore verify prune lock "
    "the of and to in is that for it as with was on be by this are from at or an have "
    "file directory data block segment header tag nonce key signature cipher compress"
).split()


def _text(rng: random.Random, size: int) -> bytes:
    out = " ".join(rng.choices(_WORDS, k=size // 5 + 1)).encode()
    return out[:size]


def make_tree(root: Path, quick: bool) -> tuple[int, int]:
    """The generated tree; returns (files, bytes)."""
    rng = random.Random(19)
    scale = 4 if quick else 1
    files = total = 0
    text_pool = _text(rng, 4 << 20)

    def put(path: Path, data: bytes) -> None:
        nonlocal files, total
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files += 1
        total += len(data)

    for i in range(3900 // scale):  # small files: text (compressible) and binary
        size = int(rng.expovariate(1 / 6000)) + 1
        d = root / f"dir{i % 40:02}" / f"sub{i % 7}"
        if rng.random() < 0.6:
            off = rng.randrange(len(text_pool) - size)
            put(d / f"note{i:04}.txt", text_pool[off : off + size])
        else:
            put(d / f"blob{i:04}.bin", rng.randbytes(size))
    for i in range(90 // scale):  # medium files
        size = rng.randrange(100_000, 1_000_000)
        data = rng.randbytes(size) if i % 2 else _text(rng, size)
        put(root / "media" / f"m{i:03}.dat", data)
    for i in range(3):  # large files: random, text, half and half
        size = (12 << 20) // scale
        if i == 0:
            data = rng.randbytes(size)
        elif i == 1:
            data = (text_pool * (size // len(text_pool) + 1))[:size]
        else:
            data = rng.randbytes(size // 2) + _text(rng, size // 2)
        put(root / "large" / f"big{i}.bin", data)
    for i in range(rng.randrange(10, 20)):
        put(root / "empty" / f"e{i}", b"")
    return files, total


def _store_size(path: Path) -> tuple[int, int]:
    sizes = [p.stat().st_size for p in path.rglob("*") if p.is_file()]
    return sum(sizes), len(sizes)


class Tool:
    name = ""

    def __init__(self, work: Path) -> None:
        self.work = work

    def _run(self, *args: str, env: dict[str, str] | None = None) -> None:
        done = subprocess.run(
            args, capture_output=True, text=True, env={**_env(), **(env or {})}, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")

    def init(self, store: Path) -> None: ...
    def backup(self, src: Path, store: Path) -> None: ...
    def restore(self, store: Path, dest: Path) -> None: ...
    def open_store(self, store: Path) -> None: ...


class Streamcrypt(Tool):
    name = "streamcrypt"

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        self.key = work / "bench.key"
        if not self.key.exists():
            self._run(*COMMAND, "init", str(self.key))

    def init(self, store: Path | str) -> None:  # untimed, as restic's init: only init makes a store
        self._run(*COMMAND, "init", str(self.key), str(store))

    def backup(self, src: Path, store: Path | str) -> None:
        self._run(*COMMAND, "backup", "-q", str(src), str(store), "-k", str(self.key))

    def restore(self, store: Path, dest: Path) -> None:
        self._run(*COMMAND, "restore", "-q", str(store), "latest", str(dest), "-k", str(self.key))

    def open_store(self, store: Path) -> None:
        self._run(*COMMAND, "snapshots", str(store))


class StreamcryptWriteOnly(Tool):
    """A write-only store: made with an age recipient, backed up with the writer key and
    its metadata cache, restored with the identity."""

    name = "write-only"

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        from streamcrypt.codecs.age import X25519Identity

        identity = X25519Identity.generate()
        self.identity = work / "bench-owner.id"
        self.identity.write_text(identity.to_string() + "\n")
        self.recipient = str(identity.recipient)
        self.writer = work / "bench-writer.key"
        self.cache = work / "bench-writer-cache"

    def init(self, store: Path) -> None:
        self._run(*COMMAND, "init", "-f", str(self.writer), str(store), "-r", self.recipient)

    def backup(self, src: Path, store: Path) -> None:
        self._run(*COMMAND, "backup", "-q", str(src), str(store), "-k", str(self.writer),
                  "--cache-dir", str(self.cache))  # fmt: skip

    def restore(self, store: Path, dest: Path) -> None:
        self._run(*COMMAND, "restore", "-q", str(store), "latest", str(dest),
                  "-i", str(self.identity))  # fmt: skip

    def open_store(self, store: Path) -> None:
        self._run(*COMMAND, "snapshots", str(store))


class Restic(Tool):
    name = "restic"

    def _restic(self, store: Path, *args: str) -> None:
        cache = self.work / "restic-cache"
        self._run(
            "restic", "-q", "-r", str(store), "--cache-dir", str(cache), *args,
            env={"RESTIC_PASSWORD": PASSWORD},
        )  # fmt: skip

    def init(self, store: Path) -> None:
        self._restic(store, "init", "--repository-version", "2")

    def backup(self, src: Path, store: Path) -> None:
        self._restic(store, "backup", str(src))

    def restore(self, store: Path, dest: Path) -> None:
        self._restic(store, "restore", "latest", "--target", str(dest))

    def open_store(self, store: Path) -> None:
        self._restic(store, "cat", "config")


def _timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _edit(src: Path, n: int) -> None:
    """A small edit in one medium file and one file added (undone by _unedit)."""
    target = src / "media" / "m001.dat"
    data = bytearray(target.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"EDITED%02d" % (n % 100)
    target.write_bytes(data)
    (src / "added.txt").write_bytes(os.urandom(50_000))


def _warm(work: Path, tools: list[Tool]) -> None:
    """One untimed round of every command of every tool on a one-file tree: streamcrypt
    writes its bytecode caches, every binary lands in the page cache."""
    src = work / "warm-src"
    src.mkdir()
    (src / "a.txt").write_text("warm\n")
    for tool in tools:
        store, dest = work / f"warm-{tool.name}", work / f"warm-restored-{tool.name}"
        tool.init(store)
        tool.backup(src, store)
        tool.open_store(store)
        tool.restore(store, dest)
        shutil.rmtree(store)
        shutil.rmtree(dest)
    shutil.rmtree(src)


def _restic_version() -> str | None:
    if shutil.which("restic") is None:
        return None
    done = subprocess.run(["restic", "version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def run(report: Report, quick: bool = False) -> None:
    restic_version = _restic_version()
    repeat = 2 if quick else 5
    work = Path(tempfile.mkdtemp(prefix="sc-bench-backup-"))
    try:
        src = work / "src"
        nfiles, nbytes = make_tree(src, quick)
        tools: list[Tool] = [Streamcrypt(work), StreamcryptWriteOnly(work)]
        if restic_version is not None:
            tools.append(Restic(work))
        _warm(work, tools)
        times: dict[tuple[str, str], list[float]] = {}
        sizes: dict[str, tuple[int, int]] = {}
        for rep in range(repeat):
            order = tools if rep % 2 == 0 else tools[::-1]
            for tool in order:
                store, dest = work / f"store-{tool.name}", work / f"restored-{tool.name}"
                tool.init(store)

                def add(what: str, seconds: float, t: Tool = tool) -> None:
                    times.setdefault((t.name, what), []).append(seconds)

                add("first backup", _timed(lambda: tool.backup(src, store)))
                sizes[tool.name] = _store_size(store)
                add("open the store", _timed(lambda: tool.open_store(store)))
                _edit(src, rep)
                add("second backup", _timed(lambda: tool.backup(src, store)))
                add("restore", _timed(lambda: tool.restore(store, dest)))
                shutil.rmtree(store)
                shutil.rmtree(dest)
        growth = _dedup(work, tools, 3 if quick else 7)
        _served(report, work, src, repeat)

        table = report.table(
            "Chunked backups: streamcrypt (streamcrypt backup) against restic",
            ["measure", "streamcrypt", "restic", "streamcrypt / restic", "target"],
        )
        targets = {
            "first backup": "<= 1.5",
            "second backup": "<= 1",
            "restore": "<= 1",
            "open the store": "",
        }
        for what in ("first backup", "second backup", "restore", "open the store"):
            ours = statistics.median(times[("streamcrypt", what)])
            theirs = times.get(("restic", what))
            if theirs is None:
                table.add(f"{what} (s)", ours, "n/a", "n/a", targets[what])
            else:
                other = statistics.median(theirs)
                table.add(f"{what} (s)", ours, other, ours / other, targets[what])
        ours_size, ours_files = sizes["streamcrypt"]
        if "restic" in sizes:
            size, files = sizes["restic"]
            table.add("store size after the first backup (MB)", ours_size / 1e6, size / 1e6,
                      ours_size / size, "<= 1")  # fmt: skip
            table.add("files in the store", ours_files, files, ours_files / files, "")
            table.add("dedup: stored per 16-byte edit of a 64 MiB file (KB)",
                      growth["streamcrypt"] / 1e3, growth["restic"] / 1e3,
                      growth["streamcrypt"] / max(growth["restic"], 1), "< 1")  # fmt: skip
        else:
            table.add("store size after the first backup (MB)", ours_size / 1e6, "n/a", "n/a", "")
            table.add("files in the store", ours_files, "n/a", "n/a", "")
            table.add("dedup: stored per 16-byte edit of a 64 MiB file (KB)",
                      growth["streamcrypt"] / 1e3, "n/a", "n/a", "")  # fmt: skip
        table.notes += [
            f"tree: {nfiles:,} files, {nbytes / 1e6:.0f} MB (text and random data, small to "
            f"{(12 >> (2 if quick else 0))} MiB); medians of {repeat} repetitions, tools "
            "interleaved; the second backup follows an 8-byte edit in a 0.1-1 MB file and "
            "one 50 KB file added",
            "both tools run as commands and include start-up; restic's include opening the "
            "repository with its password (scrypt), shown alone in 'open the store' "
            "(streamcrypt: 'snapshots', which reads no key); streamcrypt with its bytecode "
            "caches written (one untimed round first), as an installed wheel runs",
            "dedup: a 64 MiB random file backed up, then 16 bytes changed at one spread "
            "offset after another, a backup after each; the median growth of the store per "
            "edit (data, index and snapshot files)",
            (
                f"restic: {restic_version} from Debian's packages, repository version 2 "
                "(zstd 'auto')"
                if restic_version
                else "restic: not installed (apt-get install restic); its rows are n/a"
            ),
        ]
        _write_only_table(report, times, sizes, growth)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rekey_rows(report, quick)


def _write_only_table(
    report: Report,
    times: dict[tuple[str, str], list[float]],
    sizes: dict[str, tuple[int, int]],
    growth: dict[str, float],
) -> None:
    """The write-only store beside the symmetric store and restic (same runs)."""
    table = report.table(
        "Write-only backups: a store made with an age recipient against the symmetric store",
        ["measure", "write-only", "symmetric", "write-only / symmetric", "restic", "target"],
    )

    def row(what: str, ours: float, sym: float, restic: float | None, target: str) -> None:
        table.add(what, ours, sym, ours / sym, "n/a" if restic is None else restic, target)

    for what in ("first backup", "second backup", "restore"):
        restic = times.get(("restic", what))
        row(f"{what} (s)", statistics.median(times[("write-only", what)]),
            statistics.median(times[("streamcrypt", what)]),
            None if restic is None else statistics.median(restic),
            "<= 1.1" if "backup" in what else "")  # fmt: skip
    restic_size = sizes.get("restic", (None, None))[0]
    row("store size after the first backup (MB)", sizes["write-only"][0] / 1e6,
        sizes["streamcrypt"][0] / 1e6, None if restic_size is None else restic_size / 1e6,
        "<= 1.02")  # fmt: skip
    row("dedup: stored per 16-byte edit of a 64 MiB file (KB)", growth["write-only"] / 1e3,
        growth["streamcrypt"] / 1e3, growth["restic"] / 1e3 if "restic" in growth else None,
        "")  # fmt: skip
    table.notes += [
        "write-only: 'backup init -r age1...' makes the store; backups run with the writer "
        "key (and its own metadata cache), restores with the identity (-i); both "
        "streamcrypt columns run as commands in the same interleaved repetitions as the "
        "table above",
    ]


def _dedup(work: Path, tools: list[Tool], edits: int) -> dict[str, float]:
    """Median growth of each tool's store per 16-byte edit of a 64 MiB random file (the
    edits at spread offsets, one backup after each)."""
    src = work / "dedup-src"
    src.mkdir()
    original = random.Random(23).randbytes(64 << 20)
    growth: dict[str, float] = {}
    for tool in tools:
        data = bytearray(original)
        (src / "big.bin").write_bytes(data)
        store = work / f"dedup-{tool.name}"
        tool.init(store)
        tool.backup(src, store)
        grew = []
        for k in range(edits):
            at = len(data) * (k + 1) // (edits + 1)
            data[at : at + 16] = b"%016d" % k
            (src / "big.bin").write_bytes(data)
            before = _store_size(store)[0]
            tool.backup(src, store)
            grew.append(_store_size(store)[0] - before)
        growth[tool.name] = statistics.median(grew)
        shutil.rmtree(store)
    return growth


def rekey_rows(report: Report, quick: bool = False) -> None:
    """Re-keying an age file in place (``streamcrypt.rekey``: a recipient added, then
    removed again) for a small and a large payload, on this machine's temporary file
    system (ext4 here: the payload is copied) and on an XFS with reflinks loop-mounted
    for the run (``streamcrypt.testing.reflink_mount``, as root: the payload's blocks are
    cloned); the issue's target is a time independent of the payload's size. The four
    cases are interleaved, round by round."""
    import contextlib

    import anyio

    import streamcrypt
    from streamcrypt.codecs import age
    from streamcrypt.testing import reflink_mount

    sizes = (1 << 20, 64 << 20) if quick else (1 << 20, 1 << 30)
    repeat = 3 if quick else 5
    owner, other = age.X25519Identity.generate(), age.X25519Identity.generate()
    block = random.Random(29).randbytes(16 << 20)
    table = report.table(
        "Recipients changed in place: streamcrypt.rekey on an age file",
        ["file system", "payload", "time (s)", "x the smallest", "header alone (ms)", "target"],
    )
    with contextlib.ExitStack() as stack:
        places = {"ext4 (copy)": Path(stack.enter_context(tempfile.TemporaryDirectory()))}
        try:
            xfs = stack.enter_context(reflink_mount(sum(sizes) * 3 + (512 << 20)))
            places["XFS, reflinks (clone)"] = Path(xfs)
        except RuntimeError as exc:
            table.add("XFS, reflinks (clone)", "-", "-", "-", "-", f"not measured: {exc}")
        paths = {
            (fs, size): d / f"payload-{size}.age" for fs, d in places.items() for size in sizes
        }
        for (_, size), path in paths.items():

            async def write(path: Path = path, size: int = size) -> None:
                async with streamcrypt.open(
                    path, "wb", format="age", recipients=[owner.recipient]
                ) as f:
                    for at in range(0, size, len(block)):
                        await f.write(block[: min(len(block), size - at)])

            anyio.run(write)
        times: dict[tuple[str, int], list[float]] = {key: [] for key in paths}
        for n in range(repeat * 2):  # add, then remove what was added: same header sizes
            change = {"add": [other.recipient]} if n % 2 == 0 else {"remove": [other.recipient]}
            for key, path in list(paths.items())[:: 1 if n % 4 < 2 else -1]:  # both orders

                async def rekey(
                    path: Path = path, change: dict[str, list[object]] = change
                ) -> None:
                    await streamcrypt.rekey(path, identities=[owner, other], **change)  # type: ignore[arg-type]

                times[key].append(_timed(lambda: anyio.run(rekey)))
        with open(next(iter(paths.values())), "rb") as f:
            head = f.read(64 << 10)
        headers = [  # the sans-I/O header rewrite alone
            _timed(lambda: age.rekey_header(head, identities=owner, add=other.recipient))
            for _ in range(repeat * 2)
        ]
        for fs in places:
            smallest = statistics.median(times[fs, sizes[0]])
            for size in sizes:
                seconds = statistics.median(times[fs, size])
                table.add(
                    fs,
                    f"{size >> 20} MiB",
                    seconds,
                    seconds / smallest,
                    statistics.median(headers) * 1e3 if size == sizes[0] else "",
                    "<= 2 (time independent of size)" if size != sizes[0] else "",
                )
    table.notes += [
        f"medians of {repeat * 2} re-keyings per row (a recipient added, then removed), the "
        "four rows' runs interleaved round by round (in turn forward and backward); each the whole call: header "
        "rewritten, payload to a temporary beside the file, fsync, rename, fsync of the "
        "directory",
        "ext4 (the bench's temporary directory) shares no blocks between files: the clone "
        "is refused and the payload copied with os.copy_file_range, every byte and its "
        "fsync, so the time grows with the payload",
        "XFS: a sparse image made with mkfs.xfs -m reflink=1 and loop-mounted for the run "
        "(root needed; else the row says why). The new header carries a grease stanza that "
        "makes its length the old one's modulo the block (f_bsize: 4 KiB here), the bytes up to the "
        "payload's first block boundary are written and the rest cloned (FICLONERANGE): no "
        "payload byte is copied or written",
        "header alone: age.rekey_header on the file's first 64 KiB (unwrap, new stanza, "
        "new MAC; no I/O), the part of the work that does not grow with the payload",
    ]


def _start_server(work: Path, root: Path) -> tuple[subprocess.Popen[str], str]:
    """``streamcrypt backup serve`` on a free loopback port; the store URL for its writer."""
    token = work / "server.token"
    token.write_text("bench-writer-token\n")
    listen = ("--root", str(root), "--listen", "127.0.0.1:0", "--token-file", str(token))
    proc = subprocess.Popen(
        [*COMMAND, "serve", *listen],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "serving" not in line:
        proc.kill()
        raise RuntimeError(f"the store server did not start: {line!r}")
    port = line.split("http://127.0.0.1:")[1].split("/")[0]
    return proc, f"rest:http://writer:bench-writer-token@127.0.0.1:{port}/"


def _served(report: Report, work: Path, src: Path, repeat: int) -> None:
    """Backups through the append-only server on loopback against the local store, the
    same tree and command, interleaved (the server started outside the timing)."""
    tool = Streamcrypt(work)
    times: dict[tuple[str, str], list[float]] = {}
    for rep in range(repeat):
        for where in ("local", "served") if rep % 2 == 0 else ("served", "local"):
            root = work / f"store-{where}"
            proc, store = _start_server(work, root) if where == "served" else (None, str(root))
            try:
                tool.init(store)
                for what in ("first backup", "second backup"):
                    if what == "second backup":
                        _edit(src, rep)
                    seconds = _timed(lambda: tool.backup(src, store))
                    times.setdefault((where, what), []).append(seconds)
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait()
                    assert proc.stdout is not None
                    proc.stdout.close()
            shutil.rmtree(root)
    table = report.table(
        "Backups through the append-only store server (restic's REST protocol, loopback)",
        ["measure", "local store", "through the server", "server / local", "target"],
    )
    for what in ("first backup", "second backup"):
        local = statistics.median(times[("local", what)])
        served = statistics.median(times[("served", what)])
        table.add(f"{what} (s)", local, served, served / local, "<= 1.5")
    table.notes += [
        "the tree above; `streamcrypt backup` into a local directory against the same "
        "command into rest:http://127.0.0.1:PORT/ served by `streamcrypt backup serve` "
        "(uvicorn, h11, the writer's append-only token), each upload streamed to a "
        "temporary, fsynced and linked into place; medians of "
        f"{repeat} repetitions, interleaved",
    ]
