"""``streamcrypt backup``, run for real in a subprocess (``python -m streamcrypt``): init,
backup, an edit, backup, snapshots, restore ``latest`` byte for byte, verify, a damaged
pack, forget and prune, with the command's messages and exit codes (docs/CLI.md). The
library under it is tested in test_backup.py."""

from __future__ import annotations

import os
import random
import re
import stat
import subprocess
from pathlib import Path

from support import write_secret
from test_cli import sc

MiB = 1 << 20


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file's bytes and every link's target under ``root``."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def largest_pack(store: Path) -> Path:
    return max(
        (p for p in (store / "data").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
    )


def test_the_backup_command_end_to_end(tmp_path: Path) -> None:
    src, store = tmp_path / "src", tmp_path / "store"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "readme.txt").write_text("streamcrypt backup\n" * 50)
    os.chmod(src / "docs" / "readme.txt", 0o640)
    (src / "empty.bin").write_bytes(b"")
    (src / "data.bin").write_bytes(random.Random(8).randbytes(MiB))
    (src / "link").symlink_to("docs/readme.txt")

    done = sc("backup", "init", "backup.key", cwd=tmp_path)
    assert done.returncode == 0 and b"keep it apart from the store" in done.stdout
    assert stat.S_IMODE((tmp_path / "backup.key").stat().st_mode) == 0o600
    assert sc("backup", "init", "backup.key", cwd=tmp_path).returncode == 2  # never replaced
    key = ("-k", "backup.key")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x").write_text("x")
    # only init makes a store: a backup into a location without one is refused
    done = sc("backup", "backup", "empty", "store", *key, cwd=tmp_path)
    assert done.returncode == 4 and b"backup init" in done.stderr
    assert not (tmp_path / "store").exists()
    done = sc("backup", "init", "backup.key", "store", cwd=tmp_path)  # the key file kept
    assert done.returncode == 0 and b"made the store" in done.stdout

    # an empty store has no 'latest': the typed error of an unknown snapshot
    assert sc("backup", "backup", "empty", "store", *key, cwd=tmp_path).returncode == 0
    assert sc("backup", "forget", "store", "latest", *key, cwd=tmp_path).returncode == 0
    assert sc("backup", "snapshots", "store", cwd=tmp_path).stdout == b""
    for name in ("latest", "nope"):
        done = sc("backup", "restore", "store", name, "out", *key, cwd=tmp_path)
        assert done.returncode == 1 and b"no snapshot" in done.stderr

    done = sc("backup", "backup", "src", "store", *key, "--name", "one", cwd=tmp_path)
    assert done.returncode == 0 and b"3 files (3 read, 0 unchanged)" in done.stdout
    data = bytearray((src / "data.bin").read_bytes())
    data[MiB // 2 : MiB // 2 + 8] = b"EDITED!!"
    (src / "data.bin").write_bytes(data)
    done = sc("backup", "backup", "src", "store", *key, "--name", "two", cwd=tmp_path)
    assert done.returncode == 0 and b"3 files (1 read, 2 unchanged)" in done.stdout
    assert sc("backup", "snapshots", "store", cwd=tmp_path).stdout.split() == [b"one", b"two"]

    done = sc("backup", "restore", "store", "latest", "restored", *key, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(b"snapshot two: restored 3 files")
    assert tree(tmp_path / "restored") == tree(src)  # byte for byte, the edit included
    assert stat.S_IMODE((tmp_path / "restored" / "docs" / "readme.txt").stat().st_mode) == 0o640
    done = sc("backup", "verify", "store", *key, cwd=tmp_path)
    assert done.returncode == 0 and b"no problems" in done.stdout

    # a damaged pack (in a copy): verify names the file and exits 1, restore writes nothing
    subprocess.run(["cp", "-a", str(store), str(tmp_path / "damaged")], check=True)
    pack = largest_pack(tmp_path / "damaged")
    raw = bytearray(pack.read_bytes())
    raw[len(raw) // 2] ^= 1
    os.chmod(pack, 0o600)
    pack.write_bytes(raw)
    done = sc("backup", "verify", "damaged", *key, cwd=tmp_path)
    assert done.returncode == 1 and b"data.bin" in done.stdout and b"problems" in done.stderr
    done = sc("backup", "restore", "damaged", "one", "again", *key, cwd=tmp_path)
    assert done.returncode == 1 and b"data.bin" in done.stderr
    assert not (tmp_path / "again").exists()

    # another key: a key problem (3); a store that is not there: I/O (4)
    assert sc("keygen", "-o", "other.key", cwd=tmp_path).returncode == 0
    done = sc("backup", "verify", "store", "-k", "other.key", cwd=tmp_path)
    assert done.returncode == 3 and b"does not belong to the store" in done.stderr
    assert sc("backup", "snapshots", "nowhere", cwd=tmp_path).returncode == 4

    done = sc("backup", "forget", "store", "one", *key, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(b"forgot one;")
    done = sc("backup", "prune", "store", *key, cwd=tmp_path)
    assert done.returncode == 0 and b"deleted" in done.stdout
    assert sc("backup", "snapshots", "store", cwd=tmp_path).stdout.split() == [b"two"]
    done = sc("backup", "restore", "store", "two", "after-prune", *key, cwd=tmp_path)
    assert done.returncode == 0 and tree(tmp_path / "after-prune") == tree(src)


def test_backup_usage_errors_name_the_action(tmp_path: Path) -> None:
    done = sc("backup", cwd=tmp_path)
    assert done.returncode == 2 and b"ACTION" in done.stderr
    done = sc("backup", "restore", "store", "latest", "out", cwd=tmp_path)  # no -k
    assert done.returncode == 2 and b"streamcrypt backup restore --help" in done.stderr
    done = sc("backup", "backup", "src", "store", "-k", "k", "--name", "latest", cwd=tmp_path)
    assert done.returncode == 3  # the key file is read first, and is missing


def test_the_progress_bar_takes_the_librarys_done_and_total() -> None:
    from streamcrypt.cli._io import Progress

    bar = Progress("backing up", None, enabled=False)
    bar.update(10, 100)
    bar.update(40, 100)
    assert (bar._done, bar._total) == (40, 100)


def test_a_write_only_store_from_the_command(tmp_path: Path) -> None:
    from streamcrypt.codecs.age import X25519Identity

    src = tmp_path / "src"
    src.mkdir()
    (src / "data.bin").write_bytes(random.Random(9).randbytes(MiB))
    owner, other = X25519Identity.generate(), X25519Identity.generate()
    write_secret(tmp_path / "owner.id", owner.to_string() + "\n")
    write_secret(tmp_path / "other.id", other.to_string() + "\n")
    (tmp_path / "recipients").write_text(f"# the owner\n{owner.recipient}\n")

    initialised = done = sc(
        "backup", "init", "writer.key", "store", "-R", "recipients", cwd=tmp_path
    )
    assert done.returncode == 0 and b"write-only" in done.stdout
    assert stat.S_IMODE((tmp_path / "writer.key").stat().st_mode) == 0o600
    done = sc("backup", "init", "writer.key", "store", cwd=tmp_path)  # a store is there
    assert done.returncode == 4 and b"already holds a backup store" in done.stderr
    writer, cache = ("-k", "writer.key"), ("--cache-dir", "cache")
    done = sc("backup", "backup", "-q", "src", "store", *writer, *cache, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = sc("backup", "restore", "-q", "store", "latest", "out", *writer, cwd=tmp_path)
    assert done.returncode == 3 and b"identity" in done.stderr and not (tmp_path / "out").exists()
    assert sc("backup", "verify", "store", *writer, cwd=tmp_path).returncode == 3
    both = ("-k", "writer.key", "-i", "owner.id")
    assert sc("backup", "verify", "store", *both, cwd=tmp_path).returncode == 2

    done = sc(
        "backup", "rekey", "store", "-i", "owner.id", "-a", str(other.recipient), cwd=tmp_path
    )
    assert done.returncode == 0 and str(other.recipient).encode() in done.stdout
    done = sc(
        "backup", "rekey", "store", "-i", "other.id", "-x", str(owner.recipient), cwd=tmp_path
    )
    assert done.returncode == 0
    assert sc("backup", "verify", "-q", "store", "-i", "owner.id", cwd=tmp_path).returncode == 3
    signer = re.search(rb"--signer ([0-9a-f]{64})", initialised.stdout)
    assert signer is not None
    pinned = ("--signer", signer.group(1).decode())
    wrong = ("--signer", "00" * 32)
    assert (
        sc("backup", "verify", "-q", "store", "-i", "other.id", *wrong, cwd=tmp_path).returncode
        == 1
    )
    done = sc(
        "backup", "restore", "-q", "store", "latest", "out", "-i", "other.id", *pinned, cwd=tmp_path
    )
    assert done.returncode == 0 and tree(tmp_path / "out") == tree(src)
