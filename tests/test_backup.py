"""Chunked backups: the chunker, the store format, and backup/restore/verify/prune.

Real trees (symbolic links, empty and sparse files, modes, times), dedup counts after
edits, damage found by verify and by restore with the file named, the lock, and a backup
killed with SIGKILL in a subprocess that the next run completes.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrypt import backup as sb
from streamcrypt.backup._rest import RestFiles
from streamcrypt.codecs.age import X25519Identity
from streamcrypt.codecs.backup import (
    BackupKeys,
    BlobEntry,
    Manifest,
    Node,
    PackOpener,
    PackWriter,
    compress_blob,
    decode_index,
    encode_index,
    open_snapshot,
    seal_snapshot,
    verify_snapshot_signature,
)
from streamcrypt.errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    SnapshotNotFoundError,
    StoreLockedError,
    StoreNotFoundError,
    StreamCryptError,
    UnknownKeyError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import ContentChunker

MiB = 1 << 20
KEY = SecretKey(bytes(range(32)))


def run(fn: Callable[..., Any], *args: Any, backend: str = "asyncio", **kwargs: Any) -> Any:
    return anyio.run(lambda: fn(*args, **kwargs), backend=backend)


def new_store(path: Path, pack_size: int = 256 * 1024) -> Path:
    """A store with small packs, so that small trees span several of them."""
    run(sb.create_store, path, KEY, pack_size=pack_size)
    return path


def listing(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry: kind, mode, mtime (ns), and content or link target."""
    out: dict[str, tuple[Any, ...]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        mode = stat.S_IMODE(st.st_mode)
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", mode, st.st_mtime_ns)
        else:
            out[rel] = ("file", mode, st.st_mtime_ns, path.read_bytes())
    return out


def make_tree(root: Path, rng: random.Random) -> None:
    base = rng.randbytes(3 * MiB)
    (root / "docs" / "deep" / "er").mkdir(parents=True)
    (root / "docs" / "readme.txt").write_text("streamcrypt backup example\n" * 500)
    (root / "docs" / "deep" / "er" / "notes.md").write_text("# notes\n" * 3000)
    (root / "empty.bin").write_bytes(b"")
    (root / "empty-dir").mkdir()
    (root / "data").mkdir()
    (root / "data" / "base.bin").write_bytes(base)
    (root / "data" / "copy.bin").write_bytes(base)  # every chunk shared with base.bin
    (root / "data" / "large.bin").write_bytes(rng.randbytes(9 * MiB))  # read in steps
    for i in range(40):
        (root / "docs" / f"small-{i:02}.txt").write_bytes(b"x%d\n" % i * rng.randint(1, 400))
    (root / "docs" / "script.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "docs" / "script.sh", 0o750)
    os.chmod(root / "docs" / "readme.txt", 0o600)
    with open(root / "sparse.img", "wb") as f:
        f.truncate(24 * MiB)
        f.seek(8 * MiB)
        f.write(b"island" * 1000)
    (root / "links").mkdir()
    (root / "links" / "to-file").symlink_to("../docs/readme.txt")
    (root / "links" / "to-dir").symlink_to("../docs")
    (root / "links" / "dangling").symlink_to("nowhere/at/all")
    (root / "ünïcode naïve.txt").write_text("名前")
    os.utime(root / "docs" / "readme.txt", ns=(1_600_000_000_123_456_789,) * 2)
    os.chmod(root / "empty-dir", 0o750)


def chunk_ids(data: bytes) -> list[bytes]:
    keys = BackupKeys.derive(KEY)
    chunker = ContentChunker(seed=keys.chunker_seed)
    pieces = chunker.update(data) + chunker.finalize()
    return [keys.chunk_id_of(p) for p in pieces]


async def _locate(store: Path, snapshot: str, path: str) -> tuple[Path, int, int]:
    """The pack file, offset and length of the first chunk of ``path``."""
    opened = await sb.Store.open(store, KEY)
    manifest = await opened.load_snapshot(snapshot)
    index = await opened.load_index()
    node = next(n for n in manifest.nodes if n.path == path)
    loc = index.chunks[node.chunks[0]]
    return store / opened.pack_path(loc.pack_id), loc.entry.offset, loc.entry.length


def locate(store: Path, snapshot: str, path: str) -> tuple[Path, int, int]:
    result: tuple[Path, int, int] = anyio.run(_locate, store, snapshot, path)
    return result


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    os.chmod(path, 0o600)
    path.write_bytes(data)


# -- the chunker ------------------------------------------------------------------------------


def test_chunker_streaming_bounds_and_shift_resistance() -> None:
    data = random.Random(1).randbytes(6 * MiB)
    chunker = ContentChunker(seed=42)
    pieces: list[bytes] = []
    for off in range(0, len(data), 100_003):  # odd block size: boundaries must not move
        pieces += [bytes(p) for p in chunker.update(data[off : off + 100_003])]
    pieces += [bytes(p) for p in chunker.finalize()]
    assert b"".join(pieces) == data
    sizes = [len(p) for p in pieces]
    assert sizes == ContentChunker(seed=42).cut(data)
    assert all(64 * 1024 <= s <= MiB for s in sizes[:-1])
    # an insertion near the front changes the first chunk or two only
    moved = ContentChunker(seed=42).cut(data[:1000] + b"0123456789" + data[1000:])
    assert moved[2:] == sizes[2:] or moved[1:] == sizes[1:]
    assert ContentChunker(seed=43).cut(data)[:4] != sizes[:4]  # the seed moves boundaries
    assert ContentChunker(seed=42).update(b"") == [] and ContentChunker().finalize() == []
    with pytest.raises(InvalidParameterError):
        ContentChunker(100)
    with pytest.raises(InvalidParameterError):
        ContentChunker(seed=1 << 63)


_DATA = random.Random(2).randbytes(3 * MiB)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(_DATA)), max_size=12))
def test_chunker_any_split_gives_the_same_chunks(cuts: list[int]) -> None:
    chunker = ContentChunker(16 * 1024, seed=7)
    pieces: list[bytes] = []
    bounds = [0, *sorted(cuts), len(_DATA)]
    for a, b in itertools.pairwise(bounds):
        pieces += [bytes(p) for p in chunker.update(_DATA[a:b])]
    pieces += [bytes(p) for p in chunker.finalize()]
    assert [len(p) for p in pieces] == ContentChunker(16 * 1024, seed=7).cut(_DATA)
    assert b"".join(pieces) == _DATA


# -- the format --------------------------------------------------------------------------------


def test_pack_blobs_bind_to_id_and_pack() -> None:
    keys = BackupKeys.derive(KEY)
    text = b"hello pack " * 1000
    writer = PackWriter(keys)
    flags, payload = compress_blob(text)
    assert flags == 1 and len(payload) < len(text)
    a = writer.add(keys.chunk_id_of(text), flags, payload, len(text))
    noise = os.urandom(5000)
    b = writer.add(keys.chunk_id_of(noise), *compress_blob(noise), len(noise))
    assert b.flags == 0  # random bytes are kept raw
    pack = writer.finish()
    opener = PackOpener(keys, writer.pack_id, pack)
    assert opener.table(pack, len(pack)) == [a, b]
    assert opener.blob(a, pack[a.offset : a.offset + a.length]) == text
    assert opener.blob(b, pack[b.offset : b.offset + b.length]) == noise
    with pytest.raises(AuthenticationError):  # a blob read as another one
        opener.blob(a, pack[b.offset : b.offset + b.length])
    with pytest.raises(AuthenticationError):  # the pack renamed
        PackOpener(keys, bytes(32), pack).table(pack, len(pack))
    index = encode_index(keys, {writer.pack_id: [a, b]})
    assert decode_index(keys, index) == {writer.pack_id: [a, b]}
    with pytest.raises(AuthenticationError):
        decode_index(BackupKeys.derive(SecretKey(bytes(32))), index)


def test_snapshot_is_signed_and_bound_to_its_name() -> None:
    keys = BackupKeys.derive(KEY)
    node = Node("file", "a/b.txt", 0o644, 1, 3, (bytes(32),), ctime_ns=2, inode=3)
    manifest = Manifest("snap", "2025-01-01", "/src", "host", (node,))
    sealed = seal_snapshot(keys, "snap", manifest.pack())
    assert open_snapshot(keys, "snap", sealed) == manifest
    verify_snapshot_signature(keys.signing.public_key(), "snap", sealed)
    with pytest.raises(InvalidSignatureError):
        open_snapshot(keys, "other", sealed)
    with pytest.raises(InvalidSignatureError):
        open_snapshot(keys, "snap", sealed[:-1] + bytes([sealed[-1] ^ 1]))
    evil = Manifest("snap", "x", "/", "h", (Node("file", "../escape", 0o644, 1),))
    with pytest.raises(FormatError):
        open_snapshot(keys, "snap", seal_snapshot(keys, "snap", evil.pack()))


# -- backup and restore --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tree backed up twice (before and after small edits), shared by the tests."""
    root = tmp_path_factory.mktemp("backup")
    rng = random.Random(8)
    src, store = root / "src", new_store(root / "store")
    make_tree(src, rng)
    first_listing = listing(src)
    old_base = (src / "data" / "base.bin").read_bytes()
    one = run(sb.backup, src, store, KEY, name="one", backend="trio")
    packs_one = set((store / "data").rglob("*"))
    # three bytes changed in the middle of one file, one file added
    base = bytearray(old_base)
    base[1_500_000:1_500_003] = b"\xff\x00\xff"
    (src / "data" / "base.bin").write_bytes(base)
    (src / "docs" / "new.bin").write_bytes(rng.randbytes(200_000))
    two = run(sb.backup, src, store, KEY, name="two")
    return {
        "root": root,
        "src": src,
        "store": store,
        "one": one,
        "two": two,
        "first_listing": first_listing,
        "old_base": old_base,
        "packs_one": packs_one,
    }


def test_round_trip_of_a_real_tree(env: dict[str, Any], tmp_path: Path) -> None:
    one = env["one"]
    expected = env["first_listing"]
    assert one.files == sum(v[0] == "file" for v in expected.values())
    assert one.links == 3 and one.skipped == () and one.parent is None
    assert one.files_read == one.files
    dest = tmp_path / "restored"
    report = run(sb.restore, env["store"], "one", dest, KEY, backend="trio")
    assert listing(dest) == expected
    assert report.files == one.files and report.bytes_written == one.bytes_total
    sparse = (dest / "sparse.img").stat()
    assert sparse.st_size == 24 * MiB
    assert sparse.st_blocks * 512 < 4 * MiB  # the holes stayed holes
    assert os.readlink(dest / "links" / "dangling") == "nowhere/at/all"


def test_second_backup_reads_only_changed_files_and_stores_only_new_chunks(
    env: dict[str, Any], tmp_path: Path
) -> None:
    one, two, src = env["one"], env["two"], env["src"]
    assert two.parent == "one"
    assert two.files_read == 2  # base.bin and new.bin; the rest came from the cache
    old_ids = chunk_ids(env["old_base"])
    new_ids = chunk_ids((src / "data" / "base.bin").read_bytes())
    edited = set(new_ids) - set(old_ids)
    assert 1 <= len(edited) <= 2 and new_ids[-3:] == old_ids[-3:]
    added = set(chunk_ids((src / "docs" / "new.bin").read_bytes()))
    assert two.chunks_new == len(edited | added)
    assert two.bytes_new <= 2 * MiB + 200_000
    # copy.bin shares every chunk of the old base.bin: stored once in the first backup
    assert one.chunks - one.chunks_new >= len(old_ids)
    dest = tmp_path / "two"
    run(sb.restore, env["store"], "two", dest, KEY)
    assert listing(dest) == listing(src)
    assert run(sb.list_snapshots, env["store"]) == ["one", "two"]
    # an unchanged tree: nothing read, nothing stored
    three = run(sb.backup, src, env["store"], KEY, name="three")
    assert three.files_read == 0 and three.chunks_new == 0 and three.packs_written == 0
    # a touched file is read again (its mtime changed) but stores nothing new
    os.utime(src / "docs" / "small-03.txt", ns=(1, 1))
    four = run(sb.backup, src, env["store"], KEY, name="four", use_cache=True)
    assert four.files_read == 1 and four.chunks_new == 0
    run(sb.forget, env["store"], KEY, ["three", "four"])


def test_store_hides_names_and_content(env: dict[str, Any]) -> None:
    for path in env["store"].rglob("*"):
        if path.is_file() and path.name != "config":
            blob = path.read_bytes()
            assert b"streamcrypt backup example" not in blob
            assert b"readme" not in blob and b"notes" not in blob
    keys = BackupKeys.derive(KEY)
    data = (env["store"] / "snapshots" / "two").read_bytes()
    verify_snapshot_signature(keys.signing.public_bytes(), "two", data)  # public key alone


def test_verify_finds_a_damaged_chunk_and_names_the_file(
    env: dict[str, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    subprocess.run(["cp", "-a", str(env["store"]), str(store)], check=True)
    assert run(sb.verify, store, KEY).ok
    pack, offset, length = locate(store, "two", "docs/deep/er/notes.md")
    flip(pack, offset + length // 2)
    report = run(sb.verify, store, KEY)
    assert not report.ok
    [problem] = report.problems
    assert problem.kind == "chunk" and "one:docs/deep/er/notes.md" in problem.files
    assert "two:docs/deep/er/notes.md" in problem.files
    # restore fails with the file named, and leaves nothing behind
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(AuthenticationError, match=r"notes\.md"):
        run(sb.restore, store, "two", out / "dest", KEY)
    assert list(out.iterdir()) == []


def test_verify_finds_a_damaged_or_missing_pack(env: dict[str, Any], tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run(["cp", "-a", str(env["store"]), str(store)], check=True)
    pack, _, _ = locate(store, "one", "docs/readme.txt")
    flip(pack, pack.stat().st_size - 10)  # inside the pack's table
    report = run(sb.verify, store, KEY, read_data=False)
    assert [p.kind for p in report.problems] == ["pack"]
    assert "table" in report.problems[0].message
    pack.unlink()
    report = run(sb.verify, store, KEY)
    [problem] = report.problems
    assert problem.kind == "pack" and "missing" in problem.message
    assert "one:docs/readme.txt" in problem.files
    # a chunk counts as stored only while its pack is: restore refuses before writing
    with pytest.raises(FormatError, match="missing from the store") as info:
        run(sb.restore, store, "one", tmp_path / "dest", KEY)
    assert f"one:{str(info.value).split(chr(39))[1]}" in problem.files
    assert not (tmp_path / "dest").exists()


def test_tampered_renamed_snapshot_and_wrong_key(env: dict[str, Any], tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run(["cp", "-a", str(env["store"]), str(store)], check=True)
    snap = store / "snapshots" / "two"
    flip(snap, 100)
    with pytest.raises(InvalidSignatureError):
        run(sb.restore, store, "two", tmp_path / "a", KEY)
    snap.unlink()
    (store / "snapshots" / "one").rename(snap)
    with pytest.raises(InvalidSignatureError):
        run(sb.restore, store, "two", tmp_path / "b", KEY)
    report = run(sb.verify, store, KEY)
    assert [p.kind for p in report.problems] == ["snapshot"]
    with pytest.raises(UnknownKeyError):
        run(sb.backup, env["src"], store, SecretKey(bytes(32)))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(FileExistsError):  # never restores over an existing directory
        run(sb.restore, store, "one", tmp_path, KEY)
    # the config is signed: a changed chunker size is refused before anything is read
    config = json.loads((store / "config").read_text())
    config["config"] = config["config"].replace('"avg":262144', '"avg":131072')
    (store / "config").write_text(json.dumps(config))
    with pytest.raises(InvalidSignatureError):
        run(sb.verify, store, KEY)


def test_lock_keeps_two_writers_apart_and_stale_locks_go(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("data")
    store = new_store(tmp_path / "store")

    async def second_while_first_holds() -> None:
        opened = await sb.Store.open(store, KEY)
        async with opened.lock(exclusive=True):
            with pytest.raises(StoreLockedError, match="locked"):
                await sb.backup(src, store, KEY)
            assert (await sb.verify(store, KEY)).ok  # no lock stops a reader
        async with opened.lock(exclusive=False):
            assert (await sb.verify(store, KEY)).ok  # two readers are fine
            with pytest.raises(StoreLockedError):
                await sb.prune(store, KEY)  # a writer waits for readers

    anyio.run(second_while_first_holds)
    # a lock left by a dead process on this host is stale
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    lock = {
        "host": socket.gethostname(),
        "pid": int(dead.stdout),
        "time": time.time(),
        "exclusive": True,
    }
    (store / "locks").mkdir(exist_ok=True)
    (store / "locks" / "deadbeef").write_text(json.dumps(lock))
    assert run(sb.backup, src, store, KEY).files == 1
    assert list((store / "locks").iterdir()) == []


def test_prune_drops_what_no_snapshot_uses(tmp_path: Path) -> None:
    rng = random.Random(5)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"f{i}.bin").write_bytes(rng.randbytes(300_000))
    store = new_store(tmp_path / "store")
    run(sb.backup, src, store, KEY, name="a")
    (src / "f0.bin").write_bytes(rng.randbytes(300_000))
    (src / "f1.bin").unlink()
    run(sb.backup, src, store, KEY, name="b")
    before = sum(p.stat().st_size for p in (store / "data").rglob("*") if p.is_file())
    (store / "data" / ".leftover.streamcrypt-0.tmp").write_bytes(b"junk")
    assert run(sb.forget, store, KEY, ["a"]) == ["a"]
    with pytest.raises(SnapshotNotFoundError):
        run(sb.forget, store, KEY, ["a"])
    report = run(sb.prune, store, KEY, max_unused=0.0)
    assert report.chunks_removed >= 2 and report.temporaries_removed == 1
    after = sum(p.stat().st_size for p in (store / "data").rglob("*") if p.is_file())
    assert after < before - 500_000
    assert len(list((store / "index").iterdir())) == 1
    assert run(sb.verify, store, KEY).ok
    run(sb.restore, store, "b", tmp_path / "dest", KEY)
    assert listing(tmp_path / "dest") == listing(src)


def test_prune_keeps_every_pack_an_appended_index_file_contradicts(tmp_path: Path) -> None:
    """Review 4 H1: someone who can only append (a compromised writer with the key, through
    the append-only server) adds a fake pack and an index file sorting first that points
    every chunk at it, and another that lists a real pack as empty. prune deletes no real
    pack: a chunk listed twice keeps both copies unless one was read and verified."""
    rng = random.Random(11)
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(rng.randbytes(3 * MiB))
    (src / "note.txt").write_text("history\n")
    store = new_store(tmp_path / "store")
    run(sb.backup, src, store, KEY, name="before")

    async def append_lies() -> None:
        opened = await sb.Store.open(store, KEY)
        index = await opened.load_index()
        fake = b"\xff" * 32
        await opened.write_pack(fake, b"not a pack")
        entries = [
            BlobEntry(cid, loc.entry.flags, 0, loc.entry.length, loc.entry.raw_length)
            for cid, loc in index.chunks.items()
        ]
        await opened.write("index/" + "0" * 32, encode_index(opened.keys, {fake: entries}))
        real = next(iter(index.packs))
        await opened.write("index/" + "f" * 32, encode_index(opened.keys, {real: []}))

    anyio.run(append_lies)
    packs_before = {p.name for p in (store / "data").rglob("*") if p.is_file()}
    report = run(sb.prune, store, KEY)
    assert report.packs_deleted == 1  # the fake one: none of its copies verified
    packs_after = {p.name for p in (store / "data").rglob("*") if p.is_file()}
    assert packs_before - packs_after == {"ff" * 32}
    run(sb.restore, store, "before", tmp_path / "out", KEY)
    assert listing(tmp_path / "out") == listing(src)
    assert run(sb.verify, store, KEY).ok


def test_latest_names_the_newest_snapshot_wherever_a_snapshot_is_taken(tmp_path: Path) -> None:
    """``latest`` is resolved in one place (Store.find_snapshot): restore, forget and
    backup's ``parent`` take it; with no snapshot it is the error of an unknown name."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("first\n")
    store = new_store(tmp_path / "store")
    for name in ("latest", "nope"):
        with pytest.raises(SnapshotNotFoundError) as info:
            run(sb.restore, store, name, tmp_path / "none", KEY)
        assert isinstance(info.value, FileNotFoundError)  # what an unknown name gave before
        with pytest.raises(SnapshotNotFoundError):
            run(sb.forget, store, KEY, [name])
    assert not (tmp_path / "none").exists()
    with pytest.raises(InvalidParameterError, match="newest"):  # could never be named again
        run(sb.backup, src, store, KEY, name=sb.LATEST)
    run(sb.backup, src, store, KEY, name="a")
    (src / "notes.txt").write_text("second\n")
    run(sb.backup, src, store, KEY, name="b")
    restored = run(sb.restore, store, "latest", tmp_path / "dest", KEY, backend="trio")
    assert restored.snapshot == "b"
    assert (tmp_path / "dest" / "notes.txt").read_text() == "second\n"
    assert run(sb.backup, src, store, KEY, name="c", parent="latest").parent == "b"
    assert run(sb.forget, store, KEY, ["latest"]) == ["c"]
    assert run(sb.list_snapshots, store, backend="trio") == ["a", "b"]


def test_latest_is_the_last_created_whatever_the_names_and_never_a_planted_file(
    tmp_path: Path,
) -> None:
    """``latest`` follows the signed creation time, not name order (a custom name sorts
    after every default time name: review F1); a file someone without the key planted in
    snapshots/ is not listed when its name is not a snapshot's, and makes ``latest`` fail
    rather than fall back to an older snapshot when it is (review F2)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("v1 (old data)\n")
    store = new_store(tmp_path / "store")
    run(sb.backup, src, store, KEY, name="pre-upgrade")
    (src / "notes.txt").write_text("v2\n")
    newest = run(sb.backup, src, store, KEY).snapshot  # a UTC time: sorts first
    assert newest < "pre-upgrade"
    restored = run(sb.restore, store, "latest", tmp_path / "dest", KEY)
    assert restored.snapshot == newest
    assert (tmp_path / "dest" / "notes.txt").read_text() == "v2\n"
    snapshots = tmp_path / "store" / "snapshots"
    (snapshots / "2099-12-31T000000.000000Z\x1b[2J").write_bytes(b"planted")
    assert run(sb.list_snapshots, store) == sorted([newest, "pre-upgrade"])
    (snapshots / "zzz-planted").write_bytes(os.urandom(200))
    with pytest.raises(StreamCryptError):
        run(sb.restore, store, "latest", tmp_path / "dest2", KEY)
    assert not (tmp_path / "dest2").exists()
    with pytest.raises(StreamCryptError):
        run(sb.forget, store, KEY, ["latest"])
    assert (snapshots / "pre-upgrade").exists() and (snapshots / newest).exists()


def test_the_store_api_is_async() -> None:
    """One async API: every function of streamcrypt.backup that touches a store is a
    coroutine function (list_snapshots was the one blocking call)."""
    import inspect

    functions = [getattr(sb, n) for n in sb.__all__ if inspect.isfunction(getattr(sb, n))]
    blocking = [f.__name__ for f in functions if not inspect.iscoroutinefunction(f)]
    assert blocking == ["default_snapshot_name", "shown_location"]  # names, no I/O
    assert len(functions) >= 7


def test_killed_backup_leaves_a_consistent_store_and_the_next_run_completes(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(48):
        (src / f"f{i:02}.bin").write_bytes(rng.randbytes(MiB))
    store = new_store(tmp_path / "store", pack_size=1 << 16)
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY.secret_bytes().hex())
    command = ["backup", "backup", "-q", str(src), str(store), "-k", str(keyfile)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamcrypt", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list((store / "data").rglob("*"))) >= 8:  # some packs landed
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the backup finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run(sb.list_snapshots, store) == []
    packs_before = len([p for p in (store / "data").rglob("*") if p.is_file()])
    assert packs_before >= 4
    assert run(sb.verify, store, KEY).ok  # consistent: nothing references what is missing

    report = run(sb.backup, src, store, KEY, name="again")  # the dead lock is stale
    assert report.files == 48
    assert report.chunks_new < report.chunks  # what the killed run stored was reused
    checked = run(sb.verify, store, KEY)
    assert checked.ok and checked.orphan_packs == 0
    run(sb.restore, store, "again", tmp_path / "dest", KEY)
    assert listing(tmp_path / "dest") == listing(src)


def test_inline_policy_gives_the_same_store_contents(tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_tree(src, random.Random(3))
    store = new_store(tmp_path / "store")
    report = run(sb.backup, src, store, KEY, name="inline", policy=None)
    assert report.files_read == report.files
    run(sb.restore, store, "inline", tmp_path / "dest", KEY, policy=None)
    assert listing(tmp_path / "dest") == listing(src)
    assert run(sb.verify, store, KEY, policy=None).ok


@pytest.mark.slow
def test_large_tree_round_trip(tmp_path: Path) -> None:
    rng = random.Random(17)
    src = tmp_path / "src"
    for d in range(20):
        (src / f"d{d}").mkdir(parents=True)
        for f in range(100):
            size = rng.choice([0, 100, 5000, 70_000, 400_000])
            (src / f"d{d}" / f"f{f}").write_bytes(rng.randbytes(size))
    (src / "huge.bin").write_bytes(rng.randbytes(200 * MiB))
    store = new_store(tmp_path / "store", pack_size=16 * MiB)
    run(sb.backup, src, store, KEY, name="big")
    run(sb.restore, store, "big", tmp_path / "dest", KEY)
    assert listing(tmp_path / "dest") == listing(src)
    assert run(sb.verify, store, KEY).ok


def test_store_over_an_fsspec_file_system(tmp_path: Path) -> None:
    """Any fsspec URL works as a store; here fsspec's in-memory file system."""
    src = tmp_path / "src"
    make_tree(src, random.Random(4))
    url = f"memory://sc-backup-{os.urandom(6).hex()}"
    run(sb.create_store, url, KEY, pack_size=1 << 18)
    first = run(sb.backup, src, url, KEY, name="mem")
    assert first.packs_written > 3
    second = run(sb.backup, src, url, KEY, name="mem2")
    assert second.files_read == 0 and second.chunks_new == 0
    assert run(sb.list_snapshots, url) == ["mem", "mem2"]
    run(sb.restore, url, "mem2", tmp_path / "dest", KEY)
    assert listing(tmp_path / "dest") == listing(src)
    assert run(sb.verify, url, KEY).ok
    run(sb.forget, url, KEY, ["mem"])
    assert run(sb.prune, url, KEY).packs_deleted == 0
    with pytest.raises(FileNotFoundError):
        run(sb.list_snapshots, f"memory://sc-backup-none-{os.urandom(6).hex()}")


# -- what the scan saw is what is read (issue 27 #3) --------------------------------------------


def _after_scan(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    """Run ``change`` right after the backup's scan of the tree, before any file is read."""
    from streamcrypt.backup import _backup

    real = _backup.scan_tree

    def scan(*args: Any) -> Any:
        found = real(*args)
        change()
        return found

    monkeypatch.setattr(_backup, "scan_tree", scan)


def _swap_tree(tmp_path: Path) -> tuple[Path, Path]:
    src, outside = tmp_path / "src", tmp_path / "outside"
    src.mkdir()
    outside.mkdir()
    (outside / "root-only").write_bytes(b"the target's secret\n")
    for name in ("link-small", "fifo-small", "other-small", "kept"):
        (src / name).write_bytes(name.encode() * 100)
    for name in ("link-large", "fifo-large"):
        (src / name).write_bytes(bytes(9 * MiB))  # read in steps
    return src, outside


def test_a_file_swapped_after_the_scan_is_skipped_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file replaced by a symbolic link, a FIFO or another file after the scan is
    skipped (listed in ``skipped``), never read through the link, never waited on; the
    backup finishes, and its lock is free (a second backup runs)."""
    src, outside = _swap_tree(tmp_path)
    fifos = [src / "fifo-small", src / "fifo-large"]
    stuck: list[str] = []

    def swap() -> None:
        for name in ("link-small", "link-large"):
            (src / name).unlink()
            (src / name).symlink_to(outside / "root-only")
        for fifo in fifos:
            fifo.unlink()
            os.mkfifo(fifo)
        (src / "new").write_bytes(b"another file")
        os.replace(src / "new", src / "other-small")

    def unblock() -> None:  # what the code before the fix needed: a writer for each FIFO
        while not done.wait(15):
            for fifo in fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                    stuck.append(fifo.name)
                except OSError:
                    pass

    import threading

    done = threading.Event()
    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    _after_scan(monkeypatch, swap)
    store = new_store(tmp_path / "store")
    started = time.monotonic()
    try:
        report = run(sb.backup, src, store, KEY, name="swapped")
    finally:
        done.set()
        watchdog.join()
    assert not stuck and time.monotonic() - started < 15
    skipped = " ".join(report.skipped)
    for name in ("link-small", "link-large", "fifo-small", "fifo-large", "other-small"):
        assert name in skipped
    assert "since the scan" in skipped
    monkeypatch.undo()
    run(sb.restore, store, "swapped", tmp_path / "dest", KEY)
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["kept"]
    assert (tmp_path / "dest" / "kept").read_bytes() == b"kept" * 100
    for fifo in fifos:
        fifo.unlink()
    again = run(sb.backup, src, store, KEY, name="again")  # the lock was released
    assert (again.files, again.links) == (2, 2)


def test_a_file_is_read_up_to_its_scanned_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that grows after the scan (or while it is read) is stored as scanned: what
    was appended is left for the next backup, so a file that never stops growing cannot
    hold a backup forever or grow its memory without bound."""
    src = tmp_path / "src"
    src.mkdir()
    small, large = rng_bytes(3000), rng_bytes(9 * MiB + 5)
    (src / "small").write_bytes(small)
    (src / "large").write_bytes(large)

    def grow() -> None:
        for name in ("small", "large"):
            with open(src / name, "ab") as f:
                f.write(b"appended after the scan" * 50_000)

    _after_scan(monkeypatch, grow)
    store = new_store(tmp_path / "store")
    report = run(sb.backup, src, store, KEY, name="grown")
    assert report.bytes_total == len(small) + len(large) and not report.skipped
    run(sb.restore, store, "grown", tmp_path / "dest", KEY)
    assert (tmp_path / "dest" / "small").read_bytes() == small
    assert (tmp_path / "dest" / "large").read_bytes() == large


def rng_bytes(n: int) -> bytes:
    return random.Random(n).randbytes(n)


async def backup_cancelled_when(event: Any, src: Path, store: Path) -> None:
    """A backup of ``src`` named "cut", cancelled once ``event`` (a threading.Event) is set."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_set() -> None:
                await anyio.to_thread.run_sync(event.wait)
                scope.cancel()

            tg.start_soon(cancel_once_set)
            await sb.backup(src, store, KEY, name="cut")
    assert scope.cancelled_caught


def test_a_backup_cancelled_while_reading_releases_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from streamcrypt.backup import _backup

    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"f{i}").write_bytes(rng_bytes(9 * MiB + i))
    store = new_store(tmp_path / "store")
    reading = threading.Event()
    opened = _backup._open_scanned

    def slow_open(entry: Any) -> int:  # a slow disk: the cancel lands while files are read
        reading.set()
        time.sleep(0.2)
        return opened(entry)

    monkeypatch.setattr(_backup, "_open_scanned", slow_open)

    started = time.monotonic()
    run(backup_cancelled_when, reading, src, store)
    assert time.monotonic() - started < 10
    assert "cut" not in run(sb.list_snapshots, store)
    assert run(sb.backup, src, store, KEY, name="whole").files == 6


# -- JSON from the store (issue 27 #13) -------------------------------------------------------


def test_every_json_reader_is_the_one_loader() -> None:
    """Every JSON parser in streamcrypt goes through keys.load_json (typed errors, depth
    and size caps): no other module calls json.loads / json.load."""
    root = Path(__file__).resolve().parent.parent / "streamcrypt"
    callers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "json.load(" in p.read_text() or "json.loads(" in p.read_text()
    )
    assert callers == ["keys/_json.py"]


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_or_huge_json_is_a_format_error(tmp_path: Path) -> None:
    from streamcrypt.codecs.backup import MAX_CONFIG_SIZE, StoreConfig
    from streamcrypt.codecs.tink_keyset import keyset_from_json
    from streamcrypt.keys import KeyRing

    keys = BackupKeys.derive(KEY)
    good = json.loads(StoreConfig.new(keys).encode(keys))
    for data in (
        DEEP.encode(),
        json.dumps({"config": DEEP, "signature": good["signature"]}).encode(),
        json.dumps({"config": 10**9, "signature": ""}).encode(),  # not text
        b" " * (MAX_CONFIG_SIZE + 1),
    ):
        with pytest.raises(FormatError):
            StoreConfig.decode(data, keys)
    with pytest.raises(FormatError):
        Manifest.decode(DEEP.encode(), "snap")
    with pytest.raises(FormatError):
        KeyRing.from_json(DEEP, "password")
    with pytest.raises(FormatError):
        keyset_from_json(DEEP)


@pytest.mark.parametrize(
    "planted",
    [
        DEEP,
        "{not json",
        "[]",
        json.dumps({"host": "elsewhere", "pid": 1, "time": 4e9, "exclusive": True}),
        json.dumps({"host": "elsewhere", "pid": 1, "time": "soon", "exclusive": True}),
        '{"host": "elsewhere", "pid": 1, "time": NaN, "exclusive": true}',
    ],
    ids=["deep", "garbage", "not-an-object", "future", "time-not-a-number", "nan"],
)
def test_a_lock_no_holder_writes_is_stale(tmp_path: Path, planted: str) -> None:
    """Review 4 M4: a lock that does not parse, or dated in the future, was a live
    exclusive lock for good (anyone who can append to locks/ could plant one)."""
    store = new_store(tmp_path / "store")
    (store / "locks").mkdir(exist_ok=True)
    (store / "locks" / "planted").write_text(planted)
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("data")
    run(sb.backup, src, store, KEY, name="x")
    assert list((store / "locks").iterdir()) == []
    (store / "locks" / "planted").write_text(planted)
    run(sb.prune, store, KEY)
    assert list((store / "locks").iterdir()) == []


def test_a_live_exclusive_lock_does_not_stop_a_restore(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store")
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("data")
    run(sb.backup, src, store, KEY, name="x")
    lock = {"host": "elsewhere", "pid": 1, "time": time.time() + 60, "exclusive": True}
    (store / "locks" / "held").write_text(json.dumps(lock))
    run(sb.restore, store, "x", tmp_path / "out", KEY)
    assert listing(tmp_path / "out") == listing(src)
    with pytest.raises(StoreLockedError, match="elsewhere"):
        run(sb.prune, store, KEY)


def test_a_directory_swapped_for_a_link_during_the_scan_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory replaced by a symbolic link between its lstat and its listing (a race
    an attacker can win) is skipped: the scan never lists, and a backup never stores,
    what lies outside the source under the source's names."""
    from streamcrypt.backup import _tree

    src, outside = tmp_path / "src", tmp_path / "outside"
    (src / "d").mkdir(parents=True)
    (src / "d" / "a").write_text("inside")
    outside.mkdir()
    (outside / "secret").write_text("outside the source")
    (src / "link-of-its-own").symlink_to(outside)  # a link the scan sees as a link: kept

    class Swapping:
        """A directory entry whose lstat is followed at once by the swap."""

        def __init__(self, entry: Any) -> None:
            self._entry = entry

        def __getattr__(self, name: str) -> Any:
            return getattr(self._entry, name)

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            st: os.stat_result = self._entry.stat(follow_symlinks=follow_symlinks)
            if self._entry.name == "d":
                (src / "d").rename(tmp_path / "d-moved")
                (src / "d").symlink_to(outside)
            return st

    real = os.scandir

    class Listing:
        def __init__(self, where: Any) -> None:
            self._it = real(where)

        def __enter__(self) -> Any:
            return (Swapping(e) for e in self._it.__enter__())

        def __exit__(self, *exc: object) -> None:
            self._it.__exit__(*exc)

    monkeypatch.setattr(_tree.os, "scandir", Listing)
    scan = _tree.scan_tree(str(src))
    monkeypatch.undo()
    listed = {e.path: e.kind for e in scan.entries}
    assert "d/secret" not in listed and listed["link-of-its-own"] == "symlink"
    assert any(s.startswith("d") for s in scan.skipped)
    (tmp_path / "src-link").symlink_to(src)  # the source itself may be a link (the caller's)
    via_link = {e.path for e in _tree.scan_tree(str(tmp_path / "src-link")).entries}
    assert via_link == {"d", "link-of-its-own"}  # d is a link to outside now: kept as one


def test_a_store_location_is_shown_without_its_credentials(tmp_path: Path) -> None:
    """Review 4 L1: create_write_only put a rest: URL's token into its FileExistsError."""
    shown = sb.shown_location
    assert shown("rest:http://me:TOKEN@host:8000/x?t=1#f") == "rest:http://host:8000/x"
    assert shown("s3://key:secret@bucket/p?token=t") == "s3://bucket/p"
    assert shown("rest:http://[::1") == "rest:http://..."
    assert shown(tmp_path) == str(tmp_path)
    assert RestFiles("https://me:TOKEN@h:1/p/").root == "https://h:1/p"
    store = "memory://me:TOKEN@host/store-" + os.urandom(4).hex()
    recipient = str(X25519Identity.generate().recipient)
    run(sb.create_write_only, store, [recipient])
    with pytest.raises(FileExistsError) as caught:
        run(sb.create_write_only, store, [recipient])
    assert "TOKEN" not in str(caught.value) and "host/store-" in str(caught.value)


def test_every_message_naming_a_store_goes_through_shown_location() -> None:
    """A message (an f-string raised or printed) in the store's code or its command that
    formats a location, store or root does it through backup.shown_location; RestFiles'
    root is built without credentials (asserted above)."""
    sensitive = re.compile(r"(os\.fspath\()?(location|store|root|url|self\.root|args\.store)\)?")
    base = Path(sb.__file__).parent
    files = [p for p in base.glob("*.py") if p.name != "_server.py"]
    files.append(base.parent / "cli" / "_backup.py")
    offenders = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            printed = isinstance(node, ast.Call) and ast.unparse(node.func) == "print"
            if not (isinstance(node, ast.Raise) or printed):
                continue
            for inner in ast.walk(node):
                if not isinstance(inner, ast.FormattedValue):
                    continue
                text = ast.unparse(inner.value)
                if path.name == "_rest.py" and text == "self.root":
                    continue
                if sensitive.fullmatch(text):
                    offenders.append(f"{path.name}:{inner.lineno}: {{{text}}}")
    assert offenders == []


def test_old_index_files_put_back_after_a_prune_never_make_a_backup_skip_data(
    tmp_path: Path,
) -> None:
    """Review 7 H1, symmetric store: someone who can write to the store and holds no key
    copies index/ and a snapshot; the owner forgets and prunes; the copies are put back.
    The backup's metadata cache (the old snapshot: the file unchanged) and its dedup
    took the chunks as stored and wrote a snapshot that could not be restored. Only a
    chunk whose pack is in the store counts."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(rng_bytes(3 * MiB))
    store = new_store(tmp_path / "store")
    first = run(sb.backup, src, store, KEY, name="one")
    saved = {rel: (store / rel).read_bytes() for rel in ("snapshots/one", *_rels(store, "index"))}
    run(sb.forget, store, KEY, ["one"])
    assert run(sb.prune, store, KEY).chunks_removed == first.chunks_new
    for rel, data in saved.items():
        (store / rel).write_bytes(data)
    report = run(sb.backup, src, store, KEY, name="two")
    assert report.parent == "one" and report.files_read == 1
    assert report.chunks_new == first.chunks_new
    run(sb.restore, store, "two", tmp_path / "out", KEY)
    assert listing(tmp_path / "out") == listing(src)


def _rels(store: Path, folder: str) -> list[str]:
    return [f"{folder}/{p.name}" for p in (store / folder).iterdir() if not p.name.startswith(".")]


def test_prune_indexes_packs_from_their_tables_when_their_index_file_does_not_open(
    tmp_path: Path,
) -> None:
    """Review 7 M2: an index file that does not open (damaged, or junk appended by
    anyone who can write to the store) stopped restore, backup and prune. It is left out
    and named; the packs no readable index file names are indexed from their own
    tables, so prune keeps what snapshots use and removes the file."""
    src = tmp_path / "src"
    make_tree(src, random.Random(9))
    store = new_store(tmp_path / "store")
    run(sb.backup, src, store, KEY, name="one")
    for rel in _rels(store, "index"):
        flip(store / rel, 40)
    (store / "index" / "00").write_bytes(b"junkjunk")
    checked = run(sb.verify, store, KEY, read_data=False)
    assert {p.kind for p in checked.problems} == {"index"} and checked.orphan_packs > 0
    run(sb.restore, store, "one", tmp_path / "out", KEY)
    assert listing(tmp_path / "out") == listing(src)
    pruned = run(sb.prune, store, KEY)
    assert pruned.packs_deleted == 0 and pruned.chunks_removed == 0
    assert len(_rels(store, "index")) == 1
    checked = run(sb.verify, store, KEY)
    assert checked.ok and checked.orphan_packs == 0
    run(sb.restore, store, "one", tmp_path / "out2", KEY)
    assert listing(tmp_path / "out2") == listing(src)


def test_a_snapshot_that_does_not_open_blocks_no_backup_and_prune_names_it(
    tmp_path: Path,
) -> None:
    """Review 7 M2: junk at snapshots/zzz (anyone who can append may put it there) made
    every backup fail (the parent search raised). The backup passes over it and names
    it; prune, which cannot tell which chunks it uses, refuses typed and names it, and
    ``forget`` removes it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(rng_bytes(1000))
    store = new_store(tmp_path / "store")
    run(sb.backup, src, store, KEY, name="s1")
    (store / "snapshots" / "zzz").write_bytes(b"junk")
    report = run(sb.backup, src, store, KEY, name="s2")
    assert report.parent == "s1" and report.files_read == 0
    assert [p.split()[0] for p in report.store_problems] == ["snapshots/zzz"]
    with pytest.raises(InvalidSignatureError, match="forget 'zzz'"):
        run(sb.prune, store, KEY)
    run(sb.forget, store, KEY, ["zzz"])
    run(sb.prune, store, KEY)
    run(sb.restore, store, "latest", tmp_path / "out", KEY)
    assert listing(tmp_path / "out") == listing(src)


def test_a_backup_into_a_location_without_a_store_is_refused(tmp_path: Path) -> None:
    """Review 7 M3: only create_store (``backup init``) makes a store."""
    src = tmp_path / "src"
    src.mkdir()
    with pytest.raises(StoreNotFoundError, match="backup init"):
        run(sb.backup, src, tmp_path / "typo", KEY)
    assert not (tmp_path / "typo").exists()
    new_store(tmp_path / "store")
    with pytest.raises(FileExistsError):
        run(sb.create_store, tmp_path / "store", KEY)


def test_a_lock_that_was_removed_or_went_stale_is_never_refreshed(tmp_path: Path) -> None:
    """Review 7 M1: refresh_lock rewrote the lock blindly, re-creating one a prune had
    removed. A refresh writes a new lock, confirms the old one is still this holder's
    (its nonce) and fresh by its own clock, and only then removes it."""
    from streamcrypt.backup import _store

    store_path = new_store(tmp_path / "store")

    def locks() -> list[Path]:
        return [p for p in (store_path / "locks").iterdir() if not p.name.startswith(".")]

    async def main() -> None:
        store = await sb.Store.open(store_path, KEY)
        async with store.lock(exclusive=True):
            [held] = locks()
            store._lock_time -= _store._LOCK_REFRESH_SECONDS + 1  # a refresh is due
            await store.refresh_lock()
            [renewed] = locks()
            assert renewed != held  # a new lock, the old one removed
            await store.confirm_lock()
            renewed.write_text(renewed.read_text().replace('"nonce": "', '"nonce": "0'))
            with pytest.raises(StoreLockedError):  # the same file, not this holder's
                await store.confirm_lock()
            renewed.unlink()
            store._lock_time -= _store._LOCK_REFRESH_SECONDS + 1
            with pytest.raises(StoreLockedError, match="gone or stale"):
                await store.refresh_lock()
            assert locks() == []  # the one it wrote is removed again
        async with store.lock(exclusive=True):
            store._lock_doc["time"] -= sb.LOCK_STALE_SECONDS + 1  # the machine slept
            with pytest.raises(StoreLockedError):
                await store.confirm_lock()

    run(main)
    assert locks() == []


def test_a_backup_cancelled_while_taking_its_lock_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 7 L4: Store.lock awaited the lock's writing before its try/finally, so a
    cancellation landing then returned at once and the worker then wrote a lock nothing
    removed (this process's pid: never stale while it lives)."""
    import threading

    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(rng_bytes(1000))
    store = new_store(tmp_path / "store")
    acquiring = threading.Event()
    acquire = sb.Store._acquire_sync

    def slow_acquire(self: sb.Store, exclusive: bool) -> None:
        acquiring.set()
        time.sleep(0.3)
        acquire(self, exclusive)

    monkeypatch.setattr(sb.Store, "_acquire_sync", slow_acquire)

    run(backup_cancelled_when, acquiring, src, store)
    time.sleep(0.5)  # any worker still running has finished
    assert [p for p in (store / "locks").iterdir() if not p.name.startswith(".")] == []
    monkeypatch.undo()
    assert run(sb.backup, src, store, KEY, name="whole").files == 1
