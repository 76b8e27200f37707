"""Write-only backup stores: a writer that backs up and deduplicates but opens nothing,
an identity that restores, verifies, forgets and prunes, recipients changed without
touching the data, and a write-only backup killed with SIGKILL (docs/BACKUP.md)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_backup import MiB, listing, make_tree, run

from streamcrypt import backup as sb
from streamcrypt.codecs import container
from streamcrypt.codecs.age import X25519Identity
from streamcrypt.codecs.backup import (
    PACK_HEADER_SIZE,
    BackupKeys,
    DataKeys,
    Manifest,
    PackOpener,
    decode_index,
    open_snapshot,
    seal_key_file,
)
from streamcrypt.errors import (
    AuthenticationError,
    InvalidParameterError,
    InvalidSignatureError,
    StoreLockedError,
    StoreNotFoundError,
    UnknownKeyError,
)
from streamcrypt.keys import SecretKey
from streamcrypt.primitives import CDC_MAX_SIZE


def stored_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def digests(store: Path, *subdirs: str) -> dict[str, str]:
    return {
        p.relative_to(store).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for sub in subdirs
        for p in (store / sub).rglob("*")
        if p.is_file()
    }


def new_write_only(store: Path, *identities: X25519Identity, pack_size: int = 1 << 18) -> SecretKey:
    recipients = [str(i.recipient) for i in identities]
    writer: SecretKey = run(sb.create_write_only, store, recipients, pack_size=pack_size)
    return writer


@pytest.fixture(scope="module")
def wo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A write-only store with two snapshots: 'one' of a real tree, 'two' after a 16-byte
    edit in the middle of a 9 MiB file."""
    root = tmp_path_factory.mktemp("writeonly")
    src, store, cache = root / "src", root / "store", root / "cache"
    src.mkdir()
    make_tree(src, random.Random(29))
    identity = X25519Identity.generate()
    writer = new_write_only(store, identity)
    first = run(sb.backup, src, store, writer, name="one", cache_dir=cache)
    size_one = stored_bytes(store)
    before = listing(src)
    with open(src / "data" / "large.bin", "r+b") as f:
        f.seek(4 * MiB + 12345)
        f.write(b"sixteen edited!!")
    second = run(sb.backup, src, store, writer, name="two", cache_dir=cache)
    return {
        "root": root,
        "src": src,
        "store": store,
        "identity": identity,
        "writer": writer,
        "first": first,
        "second": second,
        "size_one": size_one,
        "size_two": stored_bytes(store),
        "before": before,
        "after": listing(src),
    }


def test_the_writer_backs_up_and_the_second_backup_stores_about_the_edit(
    wo: dict[str, Any],
) -> None:
    first, second = wo["first"], wo["second"]
    assert first.files_read == first.files and first.chunks_new > 10
    assert second.files_read == 1  # the writer's own cache skipped every unchanged file
    assert 1 <= second.chunks_new <= 3
    grown = wo["size_two"] - wo["size_one"]
    assert grown <= 2 * CDC_MAX_SIZE + 64 * 1024  # the edited chunks, a manifest, a key file
    assert grown < first.bytes_stored / 10


def test_a_writer_without_its_cache_still_deduplicates_through_the_id_lists(
    wo: dict[str, Any], tmp_path: Path
) -> None:
    store = wo["store"]
    before = stored_bytes(store)
    report = run(sb.backup, wo["src"], store, wo["writer"], name="three", cache_dir=tmp_path)
    assert report.files_read == report.files  # no cache: every file read again
    assert report.chunks_new == 0  # ... and nothing stored twice
    assert stored_bytes(store) - before < 64 * 1024
    run(sb.forget, store, None, ["three"], identities=wo["identity"])


def test_the_identity_restores_both_snapshots_byte_for_byte(
    wo: dict[str, Any], tmp_path: Path
) -> None:
    ident = wo["identity"]
    run(sb.restore, wo["store"], "one", tmp_path / "one", identities=ident)
    run(sb.restore, wo["store"], "two", tmp_path / "two", identities=ident)
    assert listing(tmp_path / "one") == wo["before"]
    assert listing(tmp_path / "two") == wo["after"]
    assert listing(tmp_path / "one") != listing(tmp_path / "two")
    checked = run(sb.verify, wo["store"], identities=ident)
    assert checked.ok and checked.snapshots == 2 and checked.chunks_verified > 10


def test_every_read_with_what_the_writer_holds_fails_typed(
    wo: dict[str, Any], tmp_path: Path
) -> None:
    store, writer = wo["store"], wo["writer"]
    with pytest.raises(UnknownKeyError, match="write-only"):
        run(sb.restore, store, "one", tmp_path / "out", writer)
    assert not (tmp_path / "out").exists()
    for call in (sb.verify, sb.prune):
        with pytest.raises(UnknownKeyError, match="identity"):
            run(call, store, writer)
    with pytest.raises(UnknownKeyError):
        run(sb.forget, store, writer, ["one"])
    with pytest.raises(InvalidParameterError, match="parent"):
        run(sb.backup, wo["src"], store, writer, parent="one", cache_dir=tmp_path)
    assert run(sb.list_snapshots, store) == ["one", "two"]

    opened = run(sb.Store.open, store, writer)
    keys = opened.keys
    assert not keys.reader
    with pytest.raises(UnknownKeyError):
        run(opened.load_snapshot, "one")
    pack = next(p for p in (store / "data").rglob("*") if p.is_file())
    pack_id = bytes.fromhex(pack.name)
    data = pack.read_bytes()
    index = next(p for p in (store / "index").iterdir()).read_bytes()
    snapshot = (store / "snapshots" / "one").read_bytes()
    with pytest.raises(UnknownKeyError):
        PackOpener(keys, pack_id, data[:PACK_HEADER_SIZE])
    with pytest.raises(UnknownKeyError):
        decode_index(keys, index)
    with pytest.raises(UnknownKeyError):
        open_snapshot(keys, "one", snapshot)  # the manifest's file list

    # Every data key the writer's secret could give, put where the session's belongs,
    # still opens nothing: the data keys come from the session secret alone.
    secret = writer.secret_bytes()
    session = data[6:22]
    as_master = BackupKeys.derive(writer)
    with pytest.raises(UnknownKeyError):  # the writer's secret taken as a master key
        PackOpener(as_master, pack_id, data[:PACK_HEADER_SIZE])
    header = container.read_header(snapshot[64:])
    assert header is not None
    snapshot_session = bytes.fromhex(header[0].key_id)
    guess = replace(
        as_master,
        opens={
            session: DataKeys.derive(secret, session),
            snapshot_session: DataKeys.derive(secret, snapshot_session),
        },
    )
    opener = PackOpener(guess, pack_id, data)
    with pytest.raises(AuthenticationError):
        opener.table(data, len(data))
    with pytest.raises(AuthenticationError):
        open_snapshot(guess, "one", snapshot)


def test_names_appear_nowhere_in_the_store_or_the_writers_cache(wo: dict[str, Any]) -> None:
    blobs = [p.read_bytes() for p in wo["store"].rglob("*") if p.is_file()]
    blobs += [p.read_bytes() for p in (wo["root"] / "cache").rglob("*") if p.is_file()]
    assert len(list((wo["root"] / "cache").iterdir())) == 1
    for needle in (b"readme.txt", b"large.bin", "ünïcode".encode(), b"streamcrypt backup example"):
        assert not any(needle in blob for blob in blobs), needle


def test_the_store_config_binds_its_recipients_to_the_writers_signature(
    tmp_path: Path,
) -> None:
    ident, attacker = X25519Identity.generate(), X25519Identity.generate()
    store = tmp_path / "store"
    writer = new_write_only(store, ident)
    outer = json.loads((store / "config").read_text())
    body = outer["config"].replace(str(ident.recipient), str(attacker.recipient))
    assert body != outer["config"]
    (store / "config").write_text(json.dumps({**outer, "config": body}))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"secret" * 1000)
    with pytest.raises(InvalidSignatureError):
        run(sb.backup, tmp_path / "src", store, writer, cache_dir=tmp_path / "c")
    assert not (store / "snapshots").exists()


def test_a_store_opens_with_the_key_of_its_kind(tmp_path: Path) -> None:
    ident = X25519Identity.generate()
    symmetric, write_only = tmp_path / "sym", tmp_path / "wo"
    key = SecretKey.generate()
    run(sb.create_store, symmetric, key)
    writer = new_write_only(write_only, ident)
    with pytest.raises(InvalidParameterError):
        run(sb.verify, symmetric, identities=ident)  # a symmetric store has no identity
    with pytest.raises(InvalidParameterError):
        run(sb.verify, write_only, writer, identities=ident)  # one of them, not both
    with pytest.raises(InvalidParameterError):
        run(sb.rekey, symmetric, identities=ident, add=str(ident.recipient))
    with pytest.raises(FileExistsError):
        run(sb.create_write_only, write_only, str(ident.recipient))
    with pytest.raises(UnknownKeyError):  # another writer key: the config names its signer
        run(sb.backup, tmp_path, write_only, SecretKey.generate(), cache_dir=tmp_path / "c")
    assert run(sb.verify, write_only, identities=ident).ok


def test_rekey_changes_who_reads_without_rewriting_the_data(tmp_path: Path) -> None:
    old, new, stranger = (X25519Identity.generate() for _ in range(3))
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(random.Random(1).randbytes(2 * MiB))
    writer = new_write_only(store, old)
    run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "c")
    data_before = digests(store, "data", "index", "ids", "snapshots")
    keys_before = digests(store, "keys")

    with pytest.raises(UnknownKeyError):
        run(sb.rekey, store, identities=stranger, add=str(stranger.recipient))
    with pytest.raises(InvalidParameterError):
        run(sb.rekey, store, identities=old, remove=str(old.recipient))  # none left
    with pytest.raises(InvalidParameterError):
        run(sb.rekey, store, identities=old, remove=str(new.recipient))  # not one
    assert digests(store, "keys") == keys_before

    now = run(sb.rekey, store, identities=old, add=str(new.recipient), remove=str(old.recipient))
    assert now == (str(new.recipient),)
    assert digests(store, "data", "index", "ids", "snapshots") == data_before
    assert digests(store, "keys").keys() == keys_before.keys()
    assert all(digests(store, "keys")[k] != v for k, v in keys_before.items())
    with pytest.raises(UnknownKeyError):
        run(sb.restore, store, "one", tmp_path / "x", identities=old)
    run(sb.restore, store, "one", tmp_path / "one", identities=new)
    assert listing(tmp_path / "one") == listing(src)

    # the writer follows the signed config: its next session is wrapped to `new` only
    (src / "b.bin").write_bytes(b"later" * 5000)
    run(sb.backup, src, store, writer, name="two", cache_dir=tmp_path / "c")
    run(sb.restore, store, "two", tmp_path / "two", identities=new)
    assert listing(tmp_path / "two") == listing(src)
    with pytest.raises(UnknownKeyError):
        run(sb.verify, store, identities=old)


def test_prune_rewrites_the_id_lists_so_the_writer_stores_what_prune_removed(
    tmp_path: Path,
) -> None:
    ident = X25519Identity.generate()
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    gone = random.Random(5).randbytes(MiB)
    (src / "keep.bin").write_bytes(random.Random(6).randbytes(MiB))
    (src / "gone.bin").write_bytes(gone)
    writer = new_write_only(store, ident)
    run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "c")
    (src / "gone.bin").unlink()
    run(sb.backup, src, store, writer, name="two", cache_dir=tmp_path / "c")
    run(sb.forget, store, None, ["one"], identities=ident)
    pruned = run(sb.prune, store, identities=ident)
    assert pruned.chunks_removed >= 2
    assert len(list((store / "ids").iterdir())) == 1

    (src / "gone.bin").write_bytes(gone)  # back: its chunks were pruned, so stored anew
    report = run(sb.backup, src, store, writer, name="three", cache_dir=tmp_path / "c")
    assert report.chunks_new >= 2
    run(sb.restore, store, "three", tmp_path / "three", identities=ident)
    assert listing(tmp_path / "three") == listing(src)
    assert run(sb.verify, store, identities=ident).ok


def test_killed_write_only_backup_leaves_a_consistent_store(tmp_path: Path) -> None:
    rng = random.Random(13)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(48):
        (src / f"f{i:02}.bin").write_bytes(rng.randbytes(MiB))
    ident = X25519Identity.generate()
    store = tmp_path / "store"
    writer = new_write_only(store, ident, pack_size=1 << 16)
    keyfile = tmp_path / "writer.key"
    keyfile.write_text(writer.secret_bytes().hex())
    cache = tmp_path / "cache"
    command = ["backup", "backup", "-q", str(src), str(store), "-k", str(keyfile)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamcrypt", *command, "--cache-dir", str(cache)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        ids = store / "ids"
        if ids.exists() and any(not p.name.startswith(".") for p in ids.iterdir()):
            break  # a checkpoint landed: packs, their index file and its id list
        time.sleep(0.002)
    assert proc.poll() is None, "the backup finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run(sb.list_snapshots, store) == []
    assert not cache.exists() or not any(cache.iterdir())
    checked = run(sb.verify, store, identities=ident)
    assert checked.ok  # nothing references what is missing; unindexed packs are allowed

    report = run(sb.backup, src, store, writer, name="again", cache_dir=cache)
    assert report.files == 48
    assert report.chunks_new < report.chunks  # the killed run's checkpoint was reused
    assert run(sb.verify, store, identities=ident).ok
    run(sb.prune, store, identities=ident)  # removes what the killed run left unindexed
    checked = run(sb.verify, store, identities=ident)
    assert checked.ok and checked.orphan_packs == 0
    run(sb.restore, store, "again", tmp_path / "dest", identities=ident)
    assert listing(tmp_path / "dest") == listing(src)


@pytest.mark.skipif(shutil.which("age") is None, reason="`make peers` installs age")
def test_the_store_key_files_are_age_files_the_go_age_binary_opens(tmp_path: Path) -> None:
    """The recipient model is age's: an identity made by age-keygen opens the store, and
    the age binary decrypts its key files (to the labelled secret, nothing else)."""
    subprocess.run(["age-keygen", "-o", str(tmp_path / "owner.age")], check=True,
                   capture_output=True)  # fmt: skip
    identity_text = (tmp_path / "owner.age").read_text()
    recipient = next(
        line.split(": ", 1)[1] for line in identity_text.splitlines() if "public key" in line
    )
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_text("hello from the writer\n" * 100)
    writer: SecretKey = run(sb.create_write_only, store, recipient)
    run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "c")
    paths = sorted((store / "keys").iterdir())
    assert len(paths) == 2  # the writer's secret and one backup session's
    for path in paths:
        done = subprocess.run(
            ["age", "-d", "-i", str(tmp_path / "owner.age"), str(path)],
            capture_output=True,
            check=True,
        )
        label = path.name.encode()
        assert done.stdout.startswith(b"streamcrypt-backup v1 key file\x00" + label + b"\x00")
        assert len(done.stdout) == len(b"streamcrypt-backup v1 key file\x00" + label) + 33
        if path.name == "writer":
            assert done.stdout.endswith(writer.secret_bytes())
    run(sb.restore, store, "one", tmp_path / "out", identities=tmp_path / "owner.age")
    assert listing(tmp_path / "out") == listing(src)


def test_key_files_not_the_stores_block_nothing_and_verify_names_them(tmp_path: Path) -> None:
    """Review 4 M1: one object appended under keys/ (junk, or a session key wrapped to a
    stranger) made the identity unable to open the store. A session key is unwrapped only
    when an object names its session; verify reports the ones that do not open."""
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "a.txt").write_text("precious history\n")
    identity = X25519Identity.generate()
    writer = new_write_only(store, identity)
    run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "cache")
    (store / "keys" / "zz").write_bytes(b"junk")
    stranger = str(X25519Identity.generate().recipient)
    (store / "keys" / ("ab" * 16)).write_bytes(seal_key_file([stranger], "ab" * 16, bytes(32)))
    report = run(sb.verify, store, identities=identity)
    assert {p.kind for p in report.problems} == {"key"}
    assert sorted(p.message.split()[0] for p in report.problems) == ["keys/" + "ab" * 16, "keys/zz"]
    run(sb.restore, store, "one", tmp_path / "out", identities=identity)
    assert listing(tmp_path / "out") == listing(src)
    other = X25519Identity.generate()
    run(sb.rekey, store, identities=identity, add=str(other.recipient))
    run(sb.prune, store, identities=other, recipients=str(identity.recipient))
    run(sb.restore, store, "one", tmp_path / "out2", identities=other)
    assert listing(tmp_path / "out2") == listing(src)


def test_the_signer_kept_from_init_refuses_a_store_whose_config_and_writer_were_swapped(
    tmp_path: Path,
) -> None:
    """Review 4 M2: someone who can overwrite the store (no key: the recipients are in the
    plain config) replaces config and keys/writer with their own, wrapped to the same
    recipients; the identity alone cannot tell (the signer check is circular). The
    signer printed by `backup init`, kept beside the identity, can."""
    identity = X25519Identity.generate()
    victim, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    (src / "payroll.txt").write_text("real data\n")
    writer = new_write_only(victim, identity)
    signer = BackupKeys.writer(writer).signing.public_bytes().hex()
    run(sb.backup, src, victim, writer, name="2026-12-01", cache_dir=tmp_path / "c1")
    run(sb.restore, victim, "2026-12-01", tmp_path / "ok", identities=identity, signer=signer)
    assert (tmp_path / "ok" / "payroll.txt").read_text() == "real data\n"

    recipients = json.loads(json.loads((victim / "config").read_text())["config"])["recipients"]
    evil, evil_src = tmp_path / "evil", tmp_path / "evil-src"
    evil_src.mkdir()
    (evil_src / "payroll.txt").write_text("FORGED\n")
    evil_writer = run(sb.create_write_only, evil, recipients)
    run(sb.backup, evil_src, evil, evil_writer, name="2026-12-02", cache_dir=tmp_path / "c2")
    for rel in ("config", "keys/writer"):
        shutil.copy(evil / rel, victim / rel)
    for sub in ("keys", "snapshots", "index", "ids", "data"):
        for path in (evil / sub).rglob("*"):
            target = victim / path.relative_to(evil)
            if path.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
    for call in (
        lambda: run(
            sb.restore, victim, "latest", tmp_path / "x", identities=identity, signer=signer
        ),
        lambda: run(sb.verify, victim, identities=identity, signer=signer),
        lambda: run(sb.prune, victim, identities=identity, signer=signer),
        lambda: run(sb.forget, victim, None, ["2026-12-01"], identities=identity, signer=signer),
        lambda: run(sb.rekey, victim, identities=identity, add=recipients[0], signer=signer),
    ):
        with pytest.raises(InvalidSignatureError, match="another signer"):
            call()
    assert not (tmp_path / "x").exists() and (victim / "snapshots" / "2026-12-01").exists()


def _fsyncs_and_encodes(
    monkeypatch: pytest.MonkeyPatch, store: Path, call: Callable[[], object]
) -> tuple[Counter[str], int]:
    """What ``call`` fsyncs (``"file <dir>"`` / ``"dir <dir>"``, relative to ``store``,
    ``data/<2 hex>`` as ``data``; anything outside the store as ``outside``) and how
    many manifests it encodes."""
    synced: Counter[str] = Counter()
    encodes = 0
    real_fsync, real_encode = os.fsync, Manifest.encode

    def fsync(fd: int) -> None:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        kind = "dir" if path.is_dir() else "file"
        where = path if kind == "dir" else path.parent
        try:
            rel = where.relative_to(store).as_posix() or "."
        except ValueError:
            rel = "outside"
        synced[f"{kind} {'data' if rel.startswith('data/') else rel}"] += 1
        real_fsync(fd)

    def encode(manifest: Manifest) -> bytes:
        nonlocal encodes
        encodes += 1
        return real_encode(manifest)

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        patch.setattr(Manifest, "encode", encode)
        call()
    return synced, encodes


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads fd paths from /proc")
def test_a_write_only_backup_costs_a_symmetric_one_plus_its_key_file_and_id_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29's time target: what a write-only run does beyond a symmetric one is one
    key file and an id list per index file, each written durably once. Its cache is
    replaced atomically but not fsynced (sealed: a crash costs a re-read, never a wrong
    or lost chunk), and the manifest is encoded once (the snapshot and the cache seal
    the same bytes)."""
    src = tmp_path / "src"
    src.mkdir()
    make_tree(src, random.Random(31))
    sym, wo_store, cache = tmp_path / "sym", tmp_path / "wo", tmp_path / "cache"
    key = SecretKey.generate()
    run(sb.create_store, sym, key)  # as init makes the other
    writer = new_write_only(wo_store, X25519Identity.generate(), pack_size=16 << 20)
    for name in ("one", "two"):  # a first backup (one pack, one index file), then none new
        plain, plain_encodes = _fsyncs_and_encodes(
            monkeypatch, sym, lambda n=name: run(sb.backup, src, sym, key, name=n)
        )
        write_only, encodes = _fsyncs_and_encodes(
            monkeypatch,
            wo_store,
            lambda n=name: run(sb.backup, src, wo_store, writer, name=n, cache_dir=cache),
        )
        extra = {"file keys": 1, "dir keys": 1}
        if name == "one":
            assert plain["file index"] == 1
            extra |= {"file ids": 1, "dir ids": 1}
        assert write_only - plain == Counter(extra), name
        assert not plain - write_only, name
        assert plain_encodes == encodes == 1, name
    assert run(sb.backup, src, wo_store, writer, name="three", cache_dir=cache).files_read == 0


def test_a_torn_cache_costs_a_re_read_and_stores_nothing_twice(
    wo: dict[str, Any], tmp_path: Path
) -> None:
    """The cache is not fsynced: what a crash may leave of it (here: half of it) opens as
    no cache at all, never as a wrong one."""
    cache = tmp_path / "cache"
    shutil.copytree(wo["root"] / "cache", cache)
    (kept,) = cache.iterdir()
    kept.write_bytes(kept.read_bytes()[: kept.stat().st_size // 2])
    report = run(sb.backup, wo["src"], wo["store"], wo["writer"], name="torn", cache_dir=cache)
    assert report.files_read == report.files and report.chunks_new == 0
    again = run(sb.backup, wo["src"], wo["store"], wo["writer"], name="mended", cache_dir=cache)
    assert again.files_read == 0  # the cache written after the re-read opens
    run(sb.forget, wo["store"], None, ["torn", "mended"], identities=wo["identity"])


def _saved(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}


def test_an_old_id_list_put_back_after_a_prune_never_makes_the_writer_skip_data(
    tmp_path: Path,
) -> None:
    """Review 7 H1: someone with only the writer's token copies ids/X; the owner forgets
    and prunes (the chunks go); the id list is put back under its free name. The writer
    (and its metadata cache, which says the file is unchanged) counted its chunks as
    stored and wrote a snapshot that could not be restored. A chunk counts as stored
    only while its pack is in the store (the id list names its packs)."""
    ident = X25519Identity.generate()
    store, src, cache = tmp_path / "store", tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "f.bin").write_bytes(random.Random(71).randbytes(3 * MiB))
    writer = new_write_only(store, ident)
    first = run(sb.backup, src, store, writer, name="one", cache_dir=cache)
    saved = _saved(store / "ids")
    run(sb.forget, store, None, ["one"], identities=ident)
    assert run(sb.prune, store, identities=ident).chunks_removed == first.chunks_new
    for name, data in saved.items():  # the replay: the names are free again
        (store / "ids" / name).write_bytes(data)

    # the same file, unchanged since the cache was written: read and stored again
    report = run(sb.backup, src, store, writer, name="two", cache_dir=cache)
    assert report.files_read == 1 and report.chunks_new == first.chunks_new
    run(sb.restore, store, "two", tmp_path / "out", identities=ident)
    assert listing(tmp_path / "out") == listing(src)
    assert run(sb.verify, store, identities=ident).ok


def test_an_id_list_opens_only_under_its_own_name(tmp_path: Path) -> None:
    from streamcrypt.codecs.backup import decode_ids, encode_ids

    keys = BackupKeys.writer(SecretKey.generate())
    packs = {b"p" * 32: [b"a" * 32, b"b" * 32], b"q" * 32: []}
    sealed = encode_ids(keys, "00ff", packs)
    assert decode_ids(keys, "00ff", sealed) == {p: set(ids) for p, ids in packs.items()}
    with pytest.raises(AuthenticationError):
        decode_ids(keys, "00fe", sealed)


def test_junk_in_index_and_ids_blocks_neither_restore_nor_backup_nor_prune(
    tmp_path: Path,
) -> None:
    """Review 7 M2: eight junk bytes POSTed to index/00 and ids/00 (the writer's token
    alone may) stopped every restore, prune and backup. A file that does not open is
    left out and named (the backup's report, verify); prune indexes the packs no
    readable index file names from their own tables, and removes the junk."""
    ident = X25519Identity.generate()
    store, src, cache = tmp_path / "store", tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "a.bin").write_bytes(random.Random(72).randbytes(MiB))
    writer = new_write_only(store, ident)
    run(sb.backup, src, store, writer, name="one", cache_dir=cache)
    (store / "index" / "00").write_bytes(b"junkjunk")
    (store / "ids" / "00").write_bytes(b"junkjunk")

    run(sb.restore, store, "one", tmp_path / "out", identities=ident)
    assert listing(tmp_path / "out") == listing(src)
    (src / "b.bin").write_bytes(random.Random(73).randbytes(MiB))
    report = run(sb.backup, src, store, writer, name="two", cache_dir=cache)
    assert report.files_read == 1 and [p.split()[0] for p in report.store_problems] == ["ids/00"]
    checked = run(sb.verify, store, identities=ident)
    assert [(p.kind, p.message.split()[0]) for p in checked.problems] == [("index", "index/00")]
    run(sb.prune, store, identities=ident)
    assert not (store / "index" / "00").exists() and not (store / "ids" / "00").exists()
    run(sb.restore, store, "two", tmp_path / "out2", identities=ident)
    assert listing(tmp_path / "out2") == listing(src)
    assert run(sb.verify, store, identities=ident).ok


def test_a_backup_whose_lock_was_removed_writes_no_snapshot(tmp_path: Path) -> None:
    """Review 7 M1: a backup never noticed its lock was gone (removed as stale after a
    machine slept, or by anyone with the writer's token), so a prune beside it deleted
    its packs and it then wrote a snapshot of chunks that were gone. It confirms its
    lock before every index file and the snapshot: StoreLockedError, nothing written."""
    ident = X25519Identity.generate()
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"f{i}.bin").write_bytes(random.Random(80 + i).randbytes(MiB))
    writer = new_write_only(store, ident)
    removed: list[str] = []

    def progress(done: int, total: int) -> None:
        if not removed and 0 < done < total:
            removed.extend(p.name for p in (store / "locks").iterdir())
            for name in removed:
                (store / "locks" / name).unlink()

    with pytest.raises(StoreLockedError, match="gone or stale"):
        run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "c", progress=progress)
    assert removed and run(sb.list_snapshots, store) == []
    assert not any(p for p in (store / "locks").iterdir() if not p.name.startswith("."))


def test_a_writer_key_never_makes_a_store(tmp_path: Path) -> None:
    """Review 7 M3: a writer key given a location without a store (a typo, a disk not
    mounted) made a symmetric store there that the writer key reads, and reported
    success. Only init (create_store, create_write_only) makes a store."""
    ident = X25519Identity.generate()
    writer = new_write_only(tmp_path / "store", ident)
    src = tmp_path / "src"
    src.mkdir()
    (src / "payroll.csv").write_text("alice,120000\n")
    for where in (tmp_path / "unmounted" / "store", f"memory://sc-none-{os.urandom(4).hex()}"):
        with pytest.raises(StoreNotFoundError, match="backup init"):
            run(sb.backup, src, where, writer, cache_dir=tmp_path / "c")
    assert not (tmp_path / "unmounted").exists()
    with pytest.raises(FileExistsError):
        run(sb.create_store, tmp_path / "store", writer)
