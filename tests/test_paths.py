"""Names from outside become paths through one function (streamcrypt.paths), and every
caller refuses the same hostile names: the path functions themselves, the cluster's
object mapping (client side and again on the worker), backup snapshots and restore,
rclone names and the rclone example, the command's ``-o``.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from streamcrypt import paths
from streamcrypt.codecs.rclone import RcloneKeys, RcloneNameCipher
from streamcrypt.errors import FormatError, UnsafePathError
from streamcrypt.keys import SecretKey

#: Refused everywhere: they leave the root, are absolute, or have odd components.
HOSTILE = ["../x", "a/../../x", "/etc/x", "a//b", ".", "a/./b", "a/", "", "x\x00y", ".."]
#: Refused as local names on Windows (simulated on POSIX): separators, trailing dots and
#: spaces (Windows drops them), device names.
WINDOWS_HOSTILE = ["a\\..\\..\\x", "..\\x", "c:x", "a/.. /x", "a/.../x", "x.", "CON", "nul.txt"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KEY = SecretKey(bytes(range(32)))


@pytest.fixture
def windows_separators(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local rules of Windows."""
    monkeypatch.setattr(paths, "_WINDOWS", True)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside every root, with a file a traversal would overwrite."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "x").write_text("keep")
    (out / "OUTSIDE.txt").write_text("keep")
    return out


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["OUTSIDE.txt", "x"]
    assert (outside / "x").read_text() == "keep"


# -- the functions -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_every_mapping_refuses_a_hostile_name(name: str, tmp_path: Path) -> None:
    for call in (
        lambda: paths.name_parts(name),
        lambda: paths.name_parts(name, local=False),
        lambda: paths.object_key("s3://bucket/prefix", name),
        lambda: paths.local_path(tmp_path, name),
        lambda: paths.local_paths(tmp_path, ["fine", name]),
    ):
        with pytest.raises(UnsafePathError) as caught:
            call()
        assert isinstance(caught.value, ValueError) and caught.value.http_status == 400


def test_plain_names_map_under_the_root(tmp_path: Path) -> None:
    root = os.path.realpath(tmp_path)
    assert paths.local_path(tmp_path, "a/b c/d.txt") == os.path.join(root, "a", "b c", "d.txt")
    assert paths.object_key("memory://dst/", "a/b") == "memory://dst/a/b"
    for posix_only in ("a\\b", "x.", "CON", "c:x"):  # ordinary names on POSIX
        assert paths.name_parts(posix_only) == (posix_only,)
    (tmp_path / "real").mkdir()
    (tmp_path / "inside").symlink_to("real")  # a link that stays inside is fine
    assert paths.local_path(tmp_path, "inside/f") == os.path.join(root, "inside", "f")


@pytest.mark.parametrize("name", WINDOWS_HOSTILE)
def test_windows_separators_are_refused_locally_only(
    name: str, tmp_path: Path, windows_separators: None
) -> None:
    with pytest.raises(UnsafePathError):
        paths.local_path(tmp_path, name)
    assert paths.object_key("memory://dst", name) == "memory://dst/" + name  # object stores
    assert paths.local_path(tmp_path, "console/a.b.txt").endswith("a.b.txt")


def test_a_symbolic_link_out_of_the_root_is_refused(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "sub").symlink_to(outside)  # a directory leading out
    (root / "file").symlink_to(outside / "x")  # the file itself leading out
    (root / "dangling").symlink_to(outside / "new")
    for name in ["sub/x", "sub/deeper/x", "file", "dangling"]:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            paths.local_path(root, name)
    _untouched(outside)


# -- the cluster's object mapping ----------------------------------------------------------------


def _storage() -> ModuleType:
    pytest.importorskip("distributed")
    fsspec = pytest.importorskip("fsspec")
    from streamcrypt.cluster import _storage

    fsspec.filesystem("memory").store.clear()
    return _storage


@pytest.mark.parametrize(
    "name", [n for n in HOSTILE if n not in ("", "a/")] + ["x/../../../OUTSIDE.txt"]
)  # memory keys: "a/" is stored as "a"
def test_cluster_refuses_a_hostile_object_name(name: str, tmp_path: Path, outside: Path) -> None:
    """A source object named ``x/../../../OUTSIDE.txt`` (a legal key) is refused before
    any task runs, for a local destination and an object store alike."""
    storage = _storage()
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.pipe("/src/fine.bin", b"1")
    memory.pipe("/src/" + name, b"2")
    dst = outside / "a" / "b"
    for destination in (str(dst), "memory://dst"):
        with pytest.raises(UnsafePathError):
            storage.expand("memory://src", destination, {})
    _untouched(outside)
    assert not memory.exists("/OUTSIDE.txt") and not memory.exists("/dst")


def test_cluster_refuses_windows_separators_for_local_destinations(
    tmp_path: Path, windows_separators: None
) -> None:
    storage = _storage()
    import fsspec

    fsspec.filesystem("memory").pipe("/src/" + WINDOWS_HOSTILE[0], b"1")
    with pytest.raises(UnsafePathError):
        storage.expand("memory://src", str(tmp_path / "dst"), {})
    assert storage.expand("memory://src", "memory://dst", {})  # a key, not a path there


def test_cluster_refuses_a_link_out_of_a_local_destination(tmp_path: Path, outside: Path) -> None:
    """A link in the destination, there before the job (refused by ``expand``) or planted
    after it (refused again by the task on the worker, as a typed failure)."""
    storage = _storage()
    from streamcrypt.cluster import EnvKey, _objects

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x").write_bytes(b"plaintext")
    dst.mkdir()
    (dst / "sub").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        storage.expand(str(src), str(dst), {})
    (dst / "sub").unlink()
    pairs = storage.expand(str(src), str(dst), {})
    (dst / "sub").symlink_to(outside)  # planted between the listing and the task
    spec = _objects.ObjectSpec(
        "encrypt", EnvKey("SC_PATHS_KEY"), None, _objects.CryptOptions(), "0" * 8,
        destination=str(dst),
    )  # fmt: skip
    os.environ["SC_PATHS_KEY"] = bytes(range(32)).hex()
    try:
        result = _objects.process_object(pairs[0], spec)
    finally:
        del os.environ["SC_PATHS_KEY"]
    assert result.error == "UnsafePathError"
    _untouched(outside)


def test_create_beneath_follows_no_link_below_its_root(tmp_path: Path, outside: Path) -> None:
    """Directories are made, the file appears only at the end, and any link on the way
    (even one that stays inside the root) is refused; a link as the file itself is
    replaced by the new file, never followed."""
    root = tmp_path / "root"
    with paths.create_beneath(root, "a/b/new.bin") as fd:
        os.write(fd, b"data")
        assert not (root / "a" / "b" / "new.bin").exists()
    assert (root / "a" / "b" / "new.bin").read_bytes() == b"data"
    (root / "in").symlink_to("a")
    (root / "out").symlink_to(outside)
    for name in ("in/b/x", "out/x", "a/b/new.bin/x"):
        with pytest.raises(UnsafePathError), paths.create_beneath(root, name):
            pytest.fail("opened")  # pragma: no cover
    (root / "a" / "OUTSIDE.txt").symlink_to(outside / "OUTSIDE.txt")
    with paths.create_beneath(root, "a/OUTSIDE.txt") as fd:
        os.write(fd, b"new")
    assert not (root / "a" / "OUTSIDE.txt").is_symlink()
    with pytest.raises(RuntimeError), paths.create_beneath(root, "a/failed") as fd:
        raise RuntimeError
    assert sorted(os.listdir(root / "a")) == ["OUTSIDE.txt", "b"]  # no temporary left
    _untouched(outside)


@pytest.mark.parametrize("operation", ["encrypt", "decrypt"])
def test_cluster_follows_no_link_planted_after_its_check(
    operation: str, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker checks the destination, then writes: a link planted in between (the
    review's race, done deterministically right after the check) is refused as a typed
    failure; nothing is written outside the destination."""
    storage = _storage()
    from streamcrypt.cluster import EnvKey, _objects

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    body = b"plaintext"
    if operation == "decrypt":
        from streamcrypt import encrypt_bytes

        body = encrypt_bytes(body, KEY)
    (src / "sub" / "OUTSIDE.txt").write_bytes(body)
    (dst / "sub").mkdir(parents=True)
    pairs = storage.expand(str(src), str(dst), {})
    checked = _objects.destination

    def check_then_plant(*args: Any) -> Any:
        found = checked(*args)
        if not (dst / "sub").is_symlink():
            (dst / "sub").rmdir()
            (dst / "sub").symlink_to(outside)
        return found

    monkeypatch.setattr(_objects, "destination", check_then_plant)
    monkeypatch.setenv("SC_PATHS_KEY", bytes(range(32)).hex())
    spec = _objects.ObjectSpec(
        operation, EnvKey("SC_PATHS_KEY"), None, _objects.CryptOptions(), "0" * 8,
        destination=str(dst),
    )  # fmt: skip
    result = _objects.process_object(pairs[0], spec)
    assert result.error == "UnsafePathError"
    _untouched(outside)


# -- backup snapshots and restore --------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_a_manifest_with_a_hostile_path_is_malformed(name: str) -> None:
    from streamcrypt.codecs.backup import BackupKeys, Manifest, Node, open_snapshot, seal_snapshot

    keys = BackupKeys.derive(KEY)
    evil = Manifest("snap", "x", "/", "h", (Node("file", name, 0o644, 1),))
    with pytest.raises(FormatError):
        open_snapshot(keys, "snap", seal_snapshot(keys, "snap", evil.pack()))


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_snapshot_name_is_refused(name: str) -> None:
    from streamcrypt.backup._store import check_snapshot_name
    from streamcrypt.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError):
        check_snapshot_name(name)


def test_snapshot_names_follow_windows_rules_there(windows_separators: None) -> None:
    from streamcrypt.backup._store import check_snapshot_name
    from streamcrypt.errors import InvalidParameterError

    for name in WINDOWS_HOSTILE:
        with pytest.raises(InvalidParameterError):
            check_snapshot_name(name)
    assert check_snapshot_name("2025-01-01T000000.000000Z") == "2025-01-01T000000.000000Z"


def _backed_up(tmp_path: Path, files: dict[str, bytes]) -> Path:
    from streamcrypt import backup as sb

    src, store = tmp_path / "src", tmp_path / "store"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    anyio.run(lambda: sb.create_store(store, KEY))
    anyio.run(lambda: sb.backup(src, store, KEY, name="s"))
    return store


def test_restore_maps_names_with_the_local_rules(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that is harmless where it was backed up (a backslash on POSIX) is refused
    by a restore where it separates (Windows): nothing is written, no staging is left."""
    from streamcrypt import backup as sb

    store = _backed_up(tmp_path, {"a\\..\\..\\outside\\x": b"evil", "ok": b"fine"})
    monkeypatch.setattr(paths, "_WINDOWS", True)
    dest = tmp_path / "restored"
    with pytest.raises(UnsafePathError):
        anyio.run(lambda: sb.restore(store, "s", dest, KEY))
    assert not dest.exists() and sorted(os.listdir(tmp_path)) == ["outside", "src", "store"]
    _untouched(outside)


def test_restore_never_follows_a_link_planted_in_the_destination(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every restored file is created with O_EXCL | O_NOFOLLOW: a link planted where a
    file goes (after the names were mapped) fails the restore, nothing written through it."""
    from streamcrypt import backup as sb
    from streamcrypt.backup import _restore

    store = _backed_up(tmp_path, {"d/x": b"secret" * 1000})
    real = _restore.local_paths

    def plant(root: Any, names: Any, **kw: Any) -> list[str]:
        mapped = real(root, names, **kw)
        os.makedirs(os.path.join(root, "d"))
        os.symlink(outside / "x", os.path.join(root, "d", "x"))
        return mapped

    monkeypatch.setattr(_restore, "local_paths", plant)
    with pytest.raises(FileExistsError):
        anyio.run(lambda: sb.restore(store, "s", tmp_path / "restored", KEY))
    _untouched(outside)
    assert not (tmp_path / "restored").exists()


# -- rclone names ------------------------------------------------------------------------------


RCLONE_KEYS = RcloneKeys.from_password("paths")


@pytest.mark.parametrize("name", [n for n in HOSTILE if n not in ("", "/etc/x")])
def test_an_rclone_name_that_decrypts_to_a_hostile_path_is_refused(name: str) -> None:
    """Names listed from a remote are untrusted: one that decrypts to ``..`` (or holds an
    empty component or a NUL) is refused as a path, in every mode."""
    for mode in ("standard", "obfuscate"):
        names = RcloneNameCipher(RCLONE_KEYS, mode)  # type: ignore[arg-type]
        with pytest.raises(FormatError):
            names.decrypt_path(names.encrypt_path("d/" + name))
        with pytest.raises(FormatError):
            names.decrypt_dir(names.encrypt_dir("d/" + name))
    with pytest.raises(FormatError):
        RcloneNameCipher(RCLONE_KEYS, "off").decrypt_path(f"d/{name}/b.bin")


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rclone_remote", EXAMPLES / "rclone_remote.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/x", "a//b", "sub/x"])
def test_the_rclone_example_keeps_names_under_its_root(
    name: str, tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _example()
    root = tmp_path / "root"
    root.mkdir()
    (root / "sub.bin").symlink_to(outside)  # names are kept in clear with "off"
    (root / "sub").symlink_to(outside)
    local = tmp_path / "local"
    local.write_bytes(b"data")
    common = [str(root), "--password", "p", "--filename-encryption", "off"]
    assert example.main([*common, "put", str(local), name]) == 1
    assert "UnsafePathError" in capsys.readouterr().err
    assert example.main([*common, "cat", name]) == 1
    assert "UnsafePathError" in capsys.readouterr().err
    _untouched(outside)


# -- the command's -o --------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["missing/", "x\x00y"])
def test_the_command_refuses_an_output_that_is_not_a_file_name(suffix: str, tmp_path: Path) -> None:
    from streamcrypt.cli import main

    assert main(["keygen", "-o", str(tmp_path) + "/" + suffix]) == 4
    assert os.listdir(tmp_path) == []


def test_an_output_given_as_a_symbolic_link_writes_what_it_leads_to(tmp_path: Path) -> None:
    """``-o LINK``: the link is followed, for the check and the write alike; the atomic
    rename replaced the link itself before (as root, ``-o /dev/stdout`` once replaced the
    system's link by a plaintext file). A link to a regular file: the target gets the
    plaintext, atomically, and the link stays a link; a dangling link: its target is
    created; a link to a FIFO: written in place."""
    import threading

    assert _sc("keygen", "-o", "k.key", cwd=tmp_path).returncode == 0
    (tmp_path / "in.bin").write_bytes(os.urandom(300_000))
    assert _sc("encrypt", "-k", "k.key", "-o", "ct", "in.bin", cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "target").write_text("old")
    cases = {"to-file": elsewhere / "target", "dangling": elsewhere / "new"}
    for link, target in cases.items():
        (tmp_path / link).symlink_to(target)
        done = _sc("decrypt", "-k", "k.key", "-o", link, "ct", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / link).is_symlink() and os.readlink(tmp_path / link) == str(target)
        assert target.read_bytes() == (tmp_path / "in.bin").read_bytes()
    assert sorted(os.listdir(elsewhere)) == ["new", "target"]  # no temporary left
    os.mkfifo(elsewhere / "fifo")
    (tmp_path / "to-fifo").symlink_to(elsewhere / "fifo")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append((elsewhere / "fifo").read_bytes()))
    reader.start()
    done = _sc("decrypt", "-k", "k.key", "-o", "to-fifo", "ct", cwd=tmp_path)
    reader.join(60)
    assert done.returncode == 0, done.stderr
    assert got == [(tmp_path / "in.bin").read_bytes()]
    assert (tmp_path / "to-fifo").is_symlink()
    assert stat.S_ISFIFO(os.stat(elsewhere / "fifo").st_mode)


# -- modes of new files (issue 27 #10) ----------------------------------------------------------

_MODES = r"""
import builtins, os, stat, sys
real_open = builtins.open
def no_proc(file, *args, **kwargs):  # macOS, BSD, some containers: no /proc/self/status
    if str(file).startswith("/proc"):
        raise FileNotFoundError(2, "No such file or directory", str(file))
    return real_open(file, *args, **kwargs)
builtins.open = no_proc
os.umask(int(sys.argv[2], 8))
from streamcrypt.cli._io import open_output_now
from streamcrypt.transports import create_temporary, discard_temporary
fd, tmp = create_temporary(os.path.join(sys.argv[1], "new"))
print(oct(stat.S_IMODE(os.fstat(fd).st_mode)))
discard_temporary(fd, tmp)
out = open_output_now(os.path.join(sys.argv[1], "plain.txt"))
out.put(b"decrypted plaintext")
out.commit_now()
print(oct(stat.S_IMODE(os.stat(os.path.join(sys.argv[1], "plain.txt")).st_mode)))
"""


@pytest.mark.parametrize(("umask", "mode"), [("077", "0o600"), ("027", "0o640"), ("022", "0o644")])
def test_new_outputs_follow_the_umask_without_proc(umask: str, mode: str, tmp_path: Path) -> None:
    """Without /proc/self/status a new output (decrypted plaintext included) was 0644
    whatever the umask; the kernel now applies the umask itself (nothing read, nothing
    process-wide changed by the library)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _MODES, str(tmp_path), umask],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.split() == [mode, mode]


# -- outputs that cannot be taken back (issue 27 #9) -------------------------------------------


def _sc(*args: str, cwd: Path) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *args],
        capture_output=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)},
    )  # fmt: skip


def test_verify_with_refuses_an_output_that_cannot_be_taken_back(tmp_path: Path) -> None:
    """``decrypt --verify-with`` checks the signature at the end: a FIFO or /dev/stdout
    given as -o would release plaintext (256 KiB and more) before a forged signature
    fails. They are refused (exit 2) before anything is written; a regular file is
    written atomically and appears only once the signature verified."""
    import threading

    keys = {}
    for name, kind in (("id.x", "x25519"), ("sign.key", "ed25519")):
        made = _sc("keygen", "--type", kind, "-o", name, cwd=tmp_path)
        assert made.returncode == 0
        keys[name] = made.stdout.decode().strip()
    (tmp_path / "in.bin").write_bytes(os.urandom(1 << 20))
    assert _sc(
        "encrypt", "-r", keys["id.x"], "--sign-with", "sign.key", "-o", "s.sc", "in.bin",
        cwd=tmp_path,
    ).returncode == 0  # fmt: skip
    sealed = bytearray((tmp_path / "s.sc").read_bytes())
    sealed[-3] ^= 0x01  # inside the signature: what a forger without the signing key gets
    (tmp_path / "forged.sc").write_bytes(sealed)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    verify = ("decrypt", "-i", "id.x", "--verify-with", keys["sign.key"])
    try:
        refused = _sc(*verify, "-o", "fifo", "forged.sc", cwd=tmp_path)
    finally:
        try:  # a reader still waiting for a writer: let it end
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: the reader is gone already
            pass
        reader.join(30)
    assert got == [b""], f"{sum(map(len, got))} unverified bytes reached the FIFO"
    assert refused.returncode == 2 and b"cannot be taken back" in refused.stderr
    to_stdout = _sc(*verify, "-o", "/dev/stdout", "forged.sc", cwd=tmp_path)
    assert (to_stdout.returncode, to_stdout.stdout) == (2, b"")
    (tmp_path / "to-fifo").symlink_to(fifo)  # a link to it is the FIFO
    via_link = _sc(*verify, "-o", "to-fifo", "forged.sc", cwd=tmp_path)
    assert via_link.returncode == 2 and (tmp_path / "to-fifo").is_symlink()
    bad = _sc(*verify, "-o", "out.bin", "forged.sc", cwd=tmp_path)
    assert bad.returncode == 1 and not (tmp_path / "out.bin").exists()
    ok = _sc(*verify, "-o", "out.bin", "s.sc", cwd=tmp_path)
    assert ok.returncode == 0
    assert (tmp_path / "out.bin").read_bytes() == (tmp_path / "in.bin").read_bytes()
