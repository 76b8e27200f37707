"""streamcrypt.cluster on a LocalCluster of two worker processes on loopback.

Many objects (encrypt, verify, decrypt, rotation), one object by ranges (byte-identical
to one machine), key providers (nothing secret pickled), a bad object failing alone, and a
worker killed mid-task.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")
pytest.importorskip("fsspec")

from cluster_keys import key_b
from distributed import Client
from support import local_cluster, write_secret

from streamcrypt import cluster
from streamcrypt.codecs import container
from streamcrypt.errors import (
    AuthenticationError,
    InvalidKeySizeError,
    InvalidParameterError,
    UnknownKeyError,
    UnsafePathError,
    UnsupportedFormatError,
)
from streamcrypt.keys import KeyRing, SecretKey
from streamcrypt.keys._password import INTERACTIVE

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))
RING_PASSWORD = "correct horse battery staple"
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ring_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ring") / "ring.json"
    ring = KeyRing([SecretKey(KEY_A, key_id="a"), SecretKey(KEY_B, key_id="b")], active="b")
    write_secret(path, ring.to_json(RING_PASSWORD, params=INTERACTIVE))
    return path


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    env = {
        "SC_TEST_KEY_A": base64.b64encode(KEY_A).decode(),
        "SC_TEST_KEY_B": KEY_B.hex(),
        "SC_TEST_RING_PASSWORD": RING_PASSWORD,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # worker processes inherit it
    try:
        with local_cluster() as c:
            yield c
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _tree(root: Path, sizes: list[int]) -> dict[str, bytes]:
    files = {}
    for i, size in enumerate(sizes):
        rel = f"d{i % 3}/obj{i}.bin"
        data = os.urandom(size)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        files[rel] = data
    return files


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


SIZES = [0, 1, 65535, 65536, 65537, 300_000, 1 << 20, 3_000_001]


def test_encrypt_verify_decrypt_many_objects(client: Client, tmp_path: Path) -> None:
    files = _tree(tmp_path / "src", SIZES)
    key = cluster.EnvKey("SC_TEST_KEY_A", key_id="a")
    seen: list[cluster.ObjectResult] = []
    enc = cluster.encrypt_objects(
        client, str(tmp_path / "src"), str(tmp_path / "enc"), key, suffix=".sc",
        progress=seen.append, chunk_size=100_000,
    )  # fmt: skip
    assert enc.ok and enc.objects == enc.succeeded == len(files) and len(seen) == len(files)
    assert enc.bytes_in == sum(SIZES) and enc.bytes_out > enc.bytes_in
    for rel, data in files.items():
        blob = (tmp_path / "enc" / (rel + ".sc")).read_bytes()
        assert container.StreamDecryptor(SecretKey(KEY_A)).update(blob) is not None
        dec = container.StreamDecryptor(SecretKey(KEY_A))
        assert dec.update(blob) + dec.finalize() == data

    ver = cluster.verify_objects(client, str(tmp_path / "enc"), key)
    assert ver.ok and ver.objects == len(files) and ver.bytes_out == 0

    urls = sorted(str(p) for p in (tmp_path / "enc").rglob("*.sc"))
    dec = cluster.decrypt_objects(client, urls, str(tmp_path / "dec"), key, strip_suffix=".sc")
    assert dec.ok and dec.bytes_out == sum(SIZES)
    for rel, data in files.items():
        assert (tmp_path / "dec" / Path(rel).name).read_bytes() == data
    assert not _leftovers(tmp_path)


def test_rotation_in_place_to_a_keyring(client: Client, tmp_path: Path, ring_file: Path) -> None:
    files = _tree(tmp_path / "data", [10, 200_000, 1_000_000])
    old = cluster.EnvKey("SC_TEST_KEY_A", key_id="a")
    ring = cluster.KeyRingFile(str(ring_file), password_env="SC_TEST_RING_PASSWORD")
    data = str(tmp_path / "data")
    assert cluster.encrypt_objects(client, data, data, old).ok
    rot = cluster.rekey_objects(client, data, data, old, ring)  # in place, to ring's active "b"
    assert rot.ok and rot.objects == 3
    for rel, plain in files.items():
        blob = (tmp_path / "data" / rel).read_bytes()
        assert container.read_header(blob)[0].key_id == "b"  # type: ignore[index]
        d = container.StreamDecryptor(SecretKey(KEY_B, key_id="b"))
        assert d.update(blob) + d.finalize() == plain
    # the old key no longer opens them; a callable provider with key b does
    stale = cluster.verify_objects(client, data, old)
    assert {f.error for f in stale.failures} == {"AuthenticationError"} and stale.failed == 3
    assert cluster.verify_objects(client, data, cluster.CallableKey(key_b)).ok
    assert not _leftovers(tmp_path)


def test_a_bad_object_fails_alone(client: Client, tmp_path: Path) -> None:
    files = _tree(tmp_path / "src", [100_000] * 5)
    key = cluster.EnvKey("SC_TEST_KEY_A")
    assert cluster.encrypt_objects(client, str(tmp_path / "src"), str(tmp_path / "enc"), key).ok
    tampered = tmp_path / "enc" / "d1" / "obj1.bin"
    blob = bytearray(tampered.read_bytes())
    blob[-40] ^= 1
    tampered.write_bytes(bytes(blob))
    cut = tmp_path / "enc" / "d2" / "obj2.bin"
    cut.write_bytes(cut.read_bytes()[: -(100_000 - 65536 + 16)])  # final segment gone
    (tmp_path / "dec" / "d1").mkdir(parents=True)
    (tmp_path / "dec" / "d1" / "obj1.bin").write_bytes(b"previous contents")
    summary = cluster.decrypt_objects(client, str(tmp_path / "enc"), str(tmp_path / "dec"), key)
    errors = {Path(f.url).name: f.error for f in summary.failures}
    assert errors == {"obj1.bin": "AuthenticationError", "obj2.bin": "TruncatedStreamError"}
    assert summary.succeeded == 3 and summary.objects == 5
    for rel, data in files.items():
        out = tmp_path / "dec" / rel
        if rel.endswith(("obj1.bin", "obj2.bin")):
            assert not out.exists() or out.read_bytes() == b"previous contents"
        else:
            assert out.read_bytes() == data
    assert (tmp_path / "dec" / "d1" / "obj1.bin").read_bytes() == b"previous contents"
    assert not _leftovers(tmp_path)


def test_an_object_name_that_leaves_the_destination_is_refused(
    client: Client, tmp_path: Path
) -> None:
    """Issue 27 #1: a source key ``x/../../../OUTSIDE.txt`` (legal on S3, GCS, memory) is
    refused before any task runs, by every job that writes; nothing outside is touched."""
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.pipe("/traversal/ok.bin", b"fine")
    memory.pipe("/traversal/x/../../../OUTSIDE.txt", b"evil")
    (tmp_path / "OUTSIDE.txt").write_text("keep")
    dst = str(tmp_path / "a" / "b" / "c")
    key = cluster.EnvKey("SC_TEST_KEY_A")
    try:
        for job in (cluster.encrypt_objects, cluster.decrypt_objects):
            with pytest.raises(UnsafePathError, match="OUTSIDE"):
                job(client, "memory://traversal", dst, key)
        with pytest.raises(UnsafePathError):
            cluster.rekey_objects(client, "memory://traversal", dst, key, key)
    finally:
        memory.rm("/traversal", recursive=True)
    assert (tmp_path / "OUTSIDE.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUTSIDE.txt"]


def test_missing_key_source_is_a_typed_failure(client: Client, tmp_path: Path) -> None:
    _tree(tmp_path / "src", [10, 20])
    summary = cluster.encrypt_objects(
        client, str(tmp_path / "src"), str(tmp_path / "enc"), cluster.EnvKey("SC_NOT_SET")
    )
    assert [f.error for f in summary.failures] == ["UnknownKeyError"] * 2
    assert not (tmp_path / "enc").exists() or not any((tmp_path / "enc").rglob("*.bin"))


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _one_machine(src: Path, dst: Path, salt: bytes, prefix: bytes, segment_size: int) -> None:
    enc = container.StreamEncryptor(
        SecretKey(KEY_A, key_id="a"), segment_size=segment_size, salt=salt, nonce_prefix=prefix
    )
    with src.open("rb") as fin, dst.open("wb") as fout:
        while chunk := fin.read(4 << 20):
            fout.write(enc.update(chunk))
        fout.write(enc.finalize())


def _ranges_round_trip(client: Client, tmp_path: Path, size: int, range_size: int) -> None:
    src = tmp_path / "big.bin"
    with src.open("wb") as f:
        left = size
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n
    salt, prefix, seg = os.urandom(32), os.urandom(7), 65536
    key = cluster.EnvKey("SC_TEST_KEY_A", key_id="a")
    summary = cluster.encrypt_ranges(
        client, str(src), str(tmp_path / "big.sc"), key, range_size=range_size,
        salt=salt, nonce_prefix=prefix, segment_size=seg, chunk_size=1 << 20,
    )  # fmt: skip
    assert summary.ok and summary.tasks == max(1, -(-(size // seg + 1) // (range_size // seg)))
    _one_machine(src, tmp_path / "one.sc", salt, prefix, seg)
    assert _sha(tmp_path / "big.sc") == _sha(tmp_path / "one.sc")
    (tmp_path / "one.sc").unlink()
    ver = cluster.verify_ranges(client, str(tmp_path / "big.sc"), key, range_size=range_size)
    assert ver.ok and ver.bytes_out == size
    dec = cluster.decrypt_ranges(
        client, str(tmp_path / "big.sc"), str(tmp_path / "back.bin"), key, range_size=range_size
    )
    assert dec.ok and _sha(tmp_path / "back.bin") == _sha(src)
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("size", [0, 65536 * 3, 5_000_000])
def test_one_object_by_ranges_is_byte_identical(client: Client, tmp_path: Path, size: int) -> None:
    _ranges_round_trip(client, tmp_path, size, range_size=4 * 65536)


@pytest.mark.slow
def test_one_gib_object_by_ranges(client: Client, tmp_path: Path) -> None:
    _ranges_round_trip(client, tmp_path, 1 << 30, range_size=64 << 20)


def test_tampered_range_fails_verify_and_decrypt(client: Client, tmp_path: Path) -> None:
    src = tmp_path / "obj"
    src.write_bytes(os.urandom(2_000_000))
    key = cluster.EnvKey("SC_TEST_KEY_A")
    assert cluster.encrypt_ranges(client, str(src), str(tmp_path / "obj.sc"), key).ok
    blob = bytearray((tmp_path / "obj.sc").read_bytes())
    blob[1_000_000] ^= 0x80
    (tmp_path / "obj.sc").write_bytes(bytes(blob))
    ver = cluster.verify_ranges(client, str(tmp_path / "obj.sc"), key, range_size=1 << 18)
    assert [f.error for f in ver.failures] == ["AuthenticationError"] and ver.tasks == 8
    dec = cluster.decrypt_ranges(
        client, str(tmp_path / "obj.sc"), str(tmp_path / "out"), key, range_size=1 << 18
    )
    assert not dec.ok and not (tmp_path / "out").exists() and not _leftovers(tmp_path)


def test_killed_worker_mid_task_is_retried(client: Client, tmp_path: Path) -> None:
    """SIGKILL one worker process while it writes an object: the scheduler reruns its
    task elsewhere; every output is complete and correct, nothing partial is left."""
    files = _tree(tmp_path / "src", [24 << 20] * 4)
    key = cluster.EnvKey("SC_TEST_KEY_A")
    pids: dict[str, int] = client.run(os.getpid)
    out: dict[str, Any] = {}

    def run() -> None:
        out["summary"] = cluster.encrypt_objects(
            client, str(tmp_path / "src"), str(tmp_path / "enc"), key,
            chunk_size=1 << 16, offload=False,  # slow enough to be caught mid-write
        )  # fmt: skip

    runner = threading.Thread(target=run)
    runner.start()
    killed = None
    deadline = time.monotonic() + 30
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        if any(p.stat().st_size > 0 for p in _leftovers(tmp_path / "enc")):
            busy = [w for w, keys in client.processing().items() if keys and w in pids]
            if busy:
                killed = pids[busy[0]]
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.005)
    runner.join(60)
    assert killed is not None, "the run ended before a worker could be killed mid-write"
    summary: cluster.Summary = out["summary"]
    assert summary.ok, summary.failures
    assert summary.objects == summary.succeeded == 4
    for rel, data in files.items():
        d = container.StreamDecryptor(SecretKey(KEY_A))
        blob = (tmp_path / "enc" / rel).read_bytes()
        assert d.update(blob) + d.finalize() == data
    assert not _leftovers(tmp_path)
    assert killed not in client.run(os.getpid).values()


def test_a_run_that_raises_leaves_none_of_its_temporaries(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A progress callback that raises (or a Ctrl-C) ends the run early: the run's
    temporaries are swept all the same, those of a worker that died mid-write (planted
    here under the run's id) and those of tasks cut short. Before, only a run that
    returned swept them."""
    from streamcrypt.cluster import _objects

    _tree(tmp_path / "src", [1000] * 6)
    monkeypatch.setattr(_objects, "new_run_id", lambda: "0badc0de")
    (tmp_path / "enc" / "d0").mkdir(parents=True)
    planted = tmp_path / "enc" / "d0" / ".obj0.bin.streamcrypt-0badc0dedeadbeef.tmp"
    planted.write_bytes(b"half an object")

    def progress(result: cluster.ObjectResult) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cluster.encrypt_objects(
            client, str(tmp_path / "src"), str(tmp_path / "enc"),
            cluster.EnvKey("SC_TEST_KEY_A"), progress=progress,
        )  # fmt: skip
    assert not planted.exists()
    # A task a worker had already taken when the run was cancelled still runs to its end
    # (Dask cannot stop a running task): it renames its temporary into place or removes it.
    # On a loaded machine that can take a while (one CI run saw one still there at 10 s).
    deadline = time.monotonic() + 60
    while _leftovers(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _leftovers(tmp_path)


# ------------------------------------------------------------------ providers, no cluster


def test_providers_pickle_without_secrets(tmp_path: Path, ring_file: Path) -> None:
    keyfile = tmp_path / "k"
    write_secret(keyfile, KEY_A.hex() + "\n")
    providers = [
        cluster.EnvKey("SC_TEST_KEY_A", key_id="a"),
        cluster.FileKey(str(keyfile)),
        cluster.KeyRingFile(str(ring_file), password_file=str(tmp_path / "pw")),
        cluster.CallableKey(key_b),
    ]
    for p in providers:
        blob = pickle.dumps(p)
        assert KEY_A not in blob and KEY_A.hex().encode() not in blob
        assert RING_PASSWORD.encode() not in blob
        assert pickle.loads(blob) == p or isinstance(p, cluster.CallableKey)
        assert "bytes hidden" not in repr(p) and KEY_A.hex() not in repr(p)
    assert cluster.FileKey(str(keyfile)).resolve() == SecretKey(KEY_A)
    write_secret(tmp_path / "pw", RING_PASSWORD + "\n")
    ring = providers[2].resolve()
    assert isinstance(ring, KeyRing) and ring.active_id == "b"
    with pytest.raises(TypeError):
        pickle.dumps(SecretKey(KEY_A))


def test_keys_themselves_are_refused(tmp_path: Path) -> None:
    for bad in (KEY_A, SecretKey(KEY_A), KeyRing([SecretKey(KEY_A, key_id="a")])):
        with pytest.raises(InvalidParameterError, match="key provider"):
            cluster.encrypt_objects(None, str(tmp_path), str(tmp_path), bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownKeyError):
        cluster.FileKey(str(tmp_path / "missing")).resolve()
    with pytest.raises(InvalidParameterError):
        cluster.KeyRingFile("x")
    with pytest.raises(
        InvalidKeySizeError, match="the key callable's key must be 32 bytes, got 16"
    ):
        cluster.CallableKey(lambda: bytes(16)).resolve()
    assert cluster.CallableKey(lambda: bytearray(KEY_A)).resolve() == SecretKey(KEY_A)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"chunk_size": 0}, InvalidParameterError),
        ({"suite": "rot13"}, UnsupportedFormatError),
        ({"segment_size": 0}, InvalidParameterError),
    ],
    ids=["chunk_size", "suite", "segment_size"],
)
def test_objects_and_ranges_refuse_options_alike_before_any_task(
    tmp_path: Path, bad: dict[str, Any], error: type[Exception]
) -> None:
    """Many objects and one object by ranges check their options by one function, here
    (the client is never used), with the container's typed errors. Before, ranges let
    chunk_size=0 pass, sent a bad suite to a worker (retried there) and divided by a
    segment size of 0 (ZeroDivisionError)."""
    key = cluster.EnvKey("SC_TEST_KEY_A")
    src, dst = str(tmp_path), str(tmp_path / "out")
    for call in (cluster.encrypt_objects, cluster.encrypt_ranges):
        with pytest.raises(error):
            call(None, src, dst, key, **bad)  # type: ignore[operator]
    if "chunk_size" in bad:
        for opener in (cluster.decrypt_objects, cluster.decrypt_ranges):
            with pytest.raises(error):
                opener(None, src, dst, key, **bad)  # type: ignore[operator]


def test_cli_front_runs_on_the_scheduler(client: Client, tmp_path: Path) -> None:
    from streamcrypt.cli import main
    from streamcrypt.cli._cluster import load_symmetric_key

    files = _tree(tmp_path / "src", [1000, 70_000])
    keyfile = str(tmp_path / "k.key")
    assert main(["keygen", "-o", keyfile]) == 0
    address = client.scheduler.address
    src, enc, dec = (str(tmp_path / n) for n in ("src", "enc", "dec"))
    assert main(["encrypt", "--scheduler", address, src, enc, "-k", keyfile, "-q"]) == 0
    key = load_symmetric_key(keyfile)
    for rel, data in files.items():
        d = container.StreamDecryptor(key)
        assert d.update((tmp_path / "enc" / rel).read_bytes()) + d.finalize() == data
    assert main(["decrypt", "--scheduler", address, enc, dec, "-k", keyfile, "-q"]) == 0
    assert all((tmp_path / "dec" / rel).read_bytes() == data for rel, data in files.items())
    (tmp_path / "enc" / "d0" / "obj0.bin").write_bytes(b"SCRY garbage")
    assert (
        main(["decrypt", "--scheduler", address, enc, str(tmp_path / "x"), "-k", keyfile, "-q"])
        == 1
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m streamcrypt ARGS`` in a subprocess, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "streamcrypt", *args, "-q"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_rekey_and_verify_objects_in_subprocesses(client: Client, tmp_path: Path) -> None:
    """Every cluster command as a program: encrypt, rekey to a key in the workers'
    environment, verify-objects under the new key (ok) and the old one (typed failures),
    then a tampered object named by verify-objects and failing alone in decrypt."""
    from streamcrypt.cli import main
    from streamcrypt.cli._cluster import load_symmetric_key

    files = _tree(tmp_path / "src", [1000, 70_000])
    old = str(tmp_path / "old.key")
    assert main(["keygen", "-o", old]) == 0
    address = client.scheduler.address
    src, enc, rek, dec = (str(tmp_path / n) for n in ("src", "enc", "rek", "dec"))

    run = _cli("encrypt", "--scheduler", address, src, enc, "-k", old)
    assert run.returncode == 0 and "encrypt: 2/2 objects" in run.stderr, run.stderr
    run = _cli(
        "rekey-objects", "--scheduler", address, enc, rek, "--old-key", old,
        "--new-key-env", "SC_TEST_KEY_B", "--suite", "chacha20-poly1305",
    )  # fmt: skip
    assert run.returncode == 0 and "rekey-objects: 2/2 objects" in run.stderr, run.stderr
    for rel, data in files.items():
        blob = (tmp_path / "rek" / rel).read_bytes()
        assert container.read_header(blob)[0].suite == "chacha20-poly1305"  # type: ignore[index]
        d = container.StreamDecryptor(SecretKey(KEY_B))
        assert d.update(blob) + d.finalize() == data
        with pytest.raises(AuthenticationError):
            container.StreamDecryptor(load_symmetric_key(old)).update(blob)

    run = _cli("verify-objects", "--scheduler", address, rek, "--key-env", "SC_TEST_KEY_B")
    assert run.returncode == 0 and "verify-objects: 2/2 objects" in run.stderr, run.stderr
    run = _cli("verify-objects", "--scheduler", address, rek, "-k", old)
    assert run.returncode == 1, run.stderr
    for rel in files:
        assert f"{tmp_path / 'rek' / rel}: AuthenticationError:" in run.stderr, run.stderr
    assert run.stderr.rstrip().endswith("streamcrypt: error: 2 of 2 objects failed (listed above)")

    tampered = tmp_path / "rek" / "d1" / "obj1.bin"
    blob = bytearray(tampered.read_bytes())
    blob[-20] ^= 1
    tampered.write_bytes(bytes(blob))
    run = _cli("verify-objects", "--scheduler", address, rek, "--key-env", "SC_TEST_KEY_B")
    assert run.returncode == 1 and "verify-objects: 1/2 objects" in run.stderr, run.stderr
    assert f"{tampered}: AuthenticationError:" in run.stderr
    assert "obj0.bin" not in run.stderr
    run = _cli("decrypt", "--scheduler", address, rek, dec, "--key-env", "SC_TEST_KEY_B")
    assert run.returncode == 1 and f"{tampered}: AuthenticationError:" in run.stderr
    assert (tmp_path / "dec" / "d0" / "obj0.bin").read_bytes() == files["d0/obj0.bin"]
    assert not (tmp_path / "dec" / "d1" / "obj1.bin").exists() and not _leftovers(tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rekey-objects", "--scheduler", "tcp://127.0.0.1:1", "a", "b", "--old-key", "k"],
         "rekey-objects --scheduler takes the new key from one of --new-key KEYFILE or --new-key-env"),
        (["rekey-objects", "--scheduler", "tcp://127.0.0.1:1", "a", "b", "--old-key", "k",
          "--old-key-env", "V", "--new-key", "k"],
         "takes the old key from one of --old-key KEYFILE or --old-key-env VAR"),
        (["verify-objects", "--scheduler", "tcp://127.0.0.1:1", "a"],
         "verify-objects --scheduler takes the key from one of -k KEYFILE or --key-env VAR"),
        (["rekey-objects", "a", "b", "--old-key", "k", "--new-key", "k"], "--scheduler"),
        (["verify-objects", "a", "b", "--scheduler", "x", "-k", "k"], "unrecognized"),
        (["verify", "--scheduler", "tcp://127.0.0.1:1", "a", "-k", "k"],
         "run 'streamcrypt verify-objects --scheduler ADDRESS SRC_URL'"),
    ],
)  # fmt: skip
def test_cli_cluster_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before any connection: exit 2 and one line naming what to give."""
    from streamcrypt.cli import main

    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
