"""The append-only store server (``streamcrypt backup serve``) under real uvicorn on loopback.

The store's own backup, restore, verify, forget and prune through it; overwrites and
deletes refused to the writer's token and allowed to the owner's; requests that try to
leave the store's directory refused; no token, no access; bounded memory and the body
limits; and the real ``restic`` binary (Debian's, `make peers`) using it as a repository:
``init``, ``backup``, ``restore``, ``check`` pass, ``forget --prune`` fails for the writer
and works for the owner.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from streamcrypt import backup as sb
from streamcrypt.backup import _server
from streamcrypt.backup._rest import RestFiles
from streamcrypt.backup._server import API_V1, API_V2, object_file
from streamcrypt.errors import AccessDeniedError, InvalidParameterError, UnsafePathError
from streamcrypt.keys import SecretKey

KEY = SecretKey(bytes(range(32)))
WRITER, OWNER = "writer-token-5f1c", "owner-token-9a7e"
HEX = "ab" * 32


@dataclass
class Server:
    root: Path
    port: int
    log: Path
    proc: subprocess.Popen[str]

    def url(self, token: str = WRITER) -> str:
        return f"rest:http://user:{token}@127.0.0.1:{self.port}/"

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        token: str | None = WRITER,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = dict(headers or {})
            if token is not None:
                sent["Authorization"] = "Bearer " + token
            conn.request(method, target, body=body, headers=sent)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


def start_server(tmp_path: Path, *extra: str, owner: bool = True) -> Server:
    """``streamcrypt backup serve`` in a subprocess on a free loopback port."""
    root = tmp_path / "served"
    (tmp_path / "writer.token").write_text(WRITER + "\n")
    (tmp_path / "owner.token").write_text(OWNER + "\n")
    args = ["--root", str(root), "--listen", "127.0.0.1:0"]
    args += ["--token-file", str(tmp_path / "writer.token")]
    if owner:
        args += ["--owner-token-file", str(tmp_path / "owner.token")]
    log = tmp_path / "server.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamcrypt", "backup", "serve", *args, *extra],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving" in line, f"the server did not start: {line!r} {log.read_text()}"
    port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
    return Server(root, port, log, proc)


def stop_server(server: Server) -> None:
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
        server.proc.kill()
        server.proc.wait()
    assert server.proc.stdout is not None
    server.proc.stdout.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path)
    yield running
    stop_server(running)


def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return anyio.run(lambda: fn(*args, **kwargs))


def make_tree(root: Path, seed: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = __import__("random").Random(seed)
    (root / "big.bin").write_bytes(rng.randbytes(3 << 20))
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "small.txt").write_text(f"version {seed}\n")
    (root / "empty").write_bytes(b"")
    return root


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def served_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


# -- the store's own backups through the server ---------------------------------------------------


def test_the_store_backs_up_and_restores_through_the_append_only_server(
    server: Server, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", 1)
    first = tree_bytes(src)
    run(sb.create_store, server.url(), KEY)
    run(sb.backup, src, server.url(), KEY, name="one")
    (src / "sub" / "small.txt").write_text("edited\n")
    (src / "new.txt").write_text("new file\n")
    second = tree_bytes(src)
    report = run(sb.backup, src, server.url(), KEY, name="two")
    assert report.files_read < report.files and report.bytes_new < 1 << 20  # big.bin skipped
    assert run(sb.list_snapshots, server.url()) == ["one", "two"]
    run(sb.restore, server.url(), "one", tmp_path / "r1", KEY)
    run(sb.restore, server.url(), "latest", tmp_path / "r2", KEY)
    assert tree_bytes(tmp_path / "r1") == first
    assert tree_bytes(tmp_path / "r2") == second
    assert run(sb.verify, server.url(), KEY).ok
    # The server's directory is a store in the local layout: packs under data/<2 hex>/.
    files = served_files(server.root)
    assert "config" in files and {"snapshots/one", "snapshots/two"} <= files
    packs = [f for f in files if f.startswith("data/")]
    assert packs and all(f.split("/")[1] == f.split("/")[2][:2] for f in packs)
    assert not any(f.startswith("locks/") for f in files)  # each run removed its lock
    assert run(sb.verify, server.root, KEY).ok

    # The writer cannot forget or prune: refused, typed, and nothing changes.
    with pytest.raises(AccessDeniedError, match="owner"):
        run(sb.forget, server.url(), KEY, ["one"])
    assert served_files(server.root) == files
    # The owner can.
    run(sb.forget, server.url(OWNER), KEY, ["one"])
    pruned = run(sb.prune, server.url(OWNER), KEY, max_unused=0.0)
    assert run(sb.list_snapshots, server.url()) == ["two"]
    assert "snapshots/one" not in served_files(server.root)
    assert pruned.chunks_removed >= 1 and pruned.packs_rewritten >= 1
    run(sb.restore, server.url(), "two", tmp_path / "r3", KEY)
    assert tree_bytes(tmp_path / "r3") == second


def test_messages_name_the_server_without_its_token(server: Server) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        run(sb.list_snapshots, server.url())
    assert f"127.0.0.1:{server.port}" in str(raised.value) and WRITER not in str(raised.value)
    with pytest.raises(FileNotFoundError) as raised:
        run(sb.verify, server.url(), KEY)
    assert WRITER not in str(raised.value)


def test_the_command_backs_up_through_the_server(server: Server, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", 2)
    keyfile = tmp_path / "master.key"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streamcrypt", "backup", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    assert cli("init", str(keyfile), server.url()).returncode == 0
    done = cli("backup", str(src), server.url(), "-k", str(keyfile), "-q", "--name", "s1")
    assert done.returncode == 0, done.stderr
    refused = cli("forget", server.url(), "-k", str(keyfile), "s1")
    assert refused.returncode != 0 and "append-only" in refused.stderr
    assert cli("snapshots", server.url()).stdout.split() == ["s1"]
    done = cli("restore", server.url(), "s1", str(tmp_path / "out"), "-k", str(keyfile), "-q")
    assert done.returncode == 0, done.stderr
    assert tree_bytes(tmp_path / "out") == tree_bytes(src)


# -- append-only ------------------------------------------------------------------------------


def test_overwrites_and_deletes_are_refused_to_the_writer(server: Server) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    objects = ("/config", f"/data/{HEX}", f"/index/{HEX}", f"/keys/{HEX}", f"/snapshots/{HEX}")
    for target in (*objects, "/keys/writer", f"/ids/{HEX}"):
        assert server.request("POST", target, b"first")[0] == 200, target
        status, _, _ = server.request("POST", target, b"other content")
        assert status == 403, target
        assert server.request("GET", target)[2] == b"first", target
        assert server.request("POST", target, b"first")[0] == 200, target  # a retry: unchanged
        assert server.request("DELETE", target)[0] == 403, target
        assert server.request("HEAD", target)[0] == 200, target
    assert server.request("DELETE", "/")[0] == 501
    # Locks hold no history: a client refreshes and removes its own.
    assert server.request("POST", f"/locks/{HEX}", b"lock")[0] == 200
    assert server.request("POST", f"/locks/{HEX}", b"refreshed")[0] == 200
    assert server.request("GET", f"/locks/{HEX}")[2] == b"refreshed"
    assert server.request("DELETE", f"/locks/{HEX}")[0] == 200
    assert server.request("HEAD", f"/locks/{HEX}")[0] == 404
    # The owner may delete and replace.
    assert server.request("POST", f"/snapshots/{HEX}", b"new", token=OWNER)[0] == 200
    assert server.request("DELETE", f"/data/{HEX}", token=OWNER)[0] == 200
    assert server.request("GET", f"/data/{HEX}")[0] == 404
    assert server.request("DELETE", f"/data/{HEX}", token=OWNER)[0] == 404
    # Refusals are logged, tokens never.
    log = server.log.read_text()
    assert "append-only" in log and WRITER not in log and OWNER not in log


def test_without_an_owner_token_nobody_deletes(tmp_path: Path) -> None:
    running = start_server(tmp_path, owner=False)
    try:
        assert running.request("POST", f"/snapshots/{HEX}", b"x")[0] == 200
        assert running.request("DELETE", f"/snapshots/{HEX}", token=OWNER)[0] == 401
        assert running.request("DELETE", f"/snapshots/{HEX}")[0] == 403
        assert (running.root / "snapshots" / HEX).read_bytes() == b"x"
    finally:
        stop_server(running)


# -- paths --------------------------------------------------------------------------------------


ESCAPES = [
    "/../outside",
    "/data/../../outside",
    "/snapshots/..",
    "/snapshots/%2e%2e",
    "/snapshots/..%2F..%2Foutside",
    "/snapshots/a%2Fb",
    "/snapshots/.hidden",
    "/snapshots/%00x",
    "/snapshots/a%20b",
    "/snapshots/" + "a" * 201,
    "/data/ABCD",
    "/data/xyz",
    "/data/a",
    "/other/" + HEX,
    "/config/" + HEX,
    "//config",
    "/snapshots//" + HEX,
    "/" + HEX,
    "/data/ab/" + HEX,
]


@pytest.mark.parametrize("name", ["..", ".", "", ".tmp", "a/b", "../x", "x\x00", "a" * 201])
def test_object_names_that_could_leave_the_folder_are_refused(name: str, tmp_path: Path) -> None:
    for kind in ("snapshots", "data", "locks"):
        with pytest.raises(UnsafePathError):
            object_file(str(tmp_path), kind, name)
    with pytest.raises(UnsafePathError):
        object_file(str(tmp_path), "../x", HEX)
    assert object_file("/r", "data", HEX) == f"/r/data/ab/{HEX}"
    assert (
        object_file("/r", "snapshots", "2026-12-04T224600.1Z")
        == "/r/snapshots/2026-12-04T224600.1Z"
    )


def test_requests_that_try_to_leave_the_store_are_refused(server: Server, tmp_path: Path) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    (tmp_path / "outside").write_bytes(b"secret outside the store")
    # A link planted inside the store is never followed.
    (server.root / "snapshots" / "planted").symlink_to(tmp_path / "outside")
    before = sorted(p.as_posix() for p in tmp_path.rglob("*"))
    for target in ESCAPES:
        for method in ("GET", "HEAD", "POST", "DELETE"):
            status, _, body = server.request(
                method, target, b"payload" if method == "POST" else None
            )
            assert status in (400, 404, 405), (method, target, status)
            assert b"secret" not in body
    assert server.request("GET", "/snapshots/planted")[0] == 404
    assert server.request("DELETE", "/snapshots/planted", token=OWNER)[0] in (200, 404)
    assert (tmp_path / "outside").read_bytes() == b"secret outside the store"
    after = sorted(p.as_posix() for p in tmp_path.rglob("*") if not p.name.endswith(".log"))
    assert set(after) <= set(before)
    # The client refuses the same names before sending anything.
    files = RestFiles(f"http://127.0.0.1:{server.port}")
    with pytest.raises(InvalidParameterError):
        files.pipe_file(f"{files.root}/snapshots/a b", b"x")
    with pytest.raises(InvalidParameterError):
        files.cat_file(f"{files.root}/snapshots/../config")


# -- auth ---------------------------------------------------------------------------------------


def test_requests_without_the_token_are_refused(server: Server, tmp_path: Path) -> None:
    def basic(user: str, password: str) -> dict[str, str]:
        return {
            "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        }

    assert server.request("POST", "/?create=true", token=None)[0] == 401
    assert not server.root.exists()
    status, headers, _ = server.request("GET", "/config", token=None)
    assert status == 401 and "basic" in headers.get("www-authenticate", "").lower()
    assert server.request("GET", "/config", token=WRITER + "x")[0] == 401
    assert server.request("GET", "/config", token=WRITER[:-1])[0] == 401
    assert server.request("GET", "/config", token=None, headers=basic("u", "nope"))[0] == 401
    assert (
        server.request("GET", "/config", token=None, headers={"Authorization": "Basic !!"})[0]
        == 401
    )
    assert server.request("POST", f"/snapshots/{HEX}", b"x", token="")[0] == 401
    assert server.request("POST", "/?create=true", token=None, headers=basic("u", WRITER))[0] == 200
    assert server.request("GET", "/snapshots/", token=None, headers=basic("any", OWNER))[0] == 200
    assert not (server.root / "snapshots" / HEX).exists()
    with pytest.raises(AccessDeniedError, match="credentials"):
        run(sb.backup, make_tree(tmp_path / "src", 3), server.url("wrong"), KEY)
    assert WRITER not in server.log.read_text()


# -- the protocol -------------------------------------------------------------------------------


def test_lists_ranges_and_heads_follow_the_protocol(server: Server) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    data = bytes(range(256)) * 40
    names = [HEX, "cd" * 32]
    for name in names:
        assert server.request("POST", f"/data/{name}", data)[0] == 200
    status, headers, body = server.request("GET", "/data/", headers={"Accept": API_V2})
    assert status == 200 and headers["content-type"] == API_V2
    assert sorted(json.loads(body), key=lambda e: e["name"]) == [
        {"name": n, "size": len(data)} for n in sorted(names)
    ]
    status, headers, body = server.request("GET", "/data/")
    assert headers["content-type"] == API_V1 and sorted(json.loads(body)) == sorted(names)
    assert json.loads(server.request("GET", "/index/", headers={"Accept": API_V2})[2]) == []
    status, headers, body = server.request("HEAD", f"/data/{HEX}")
    assert status == 200 and headers["content-length"] == str(len(data)) and body == b""
    for ask, span in (
        ("bytes=2-5", (2, 6)),
        ("bytes=10000-", (10000, len(data))),
        ("bytes=-3", (len(data) - 3, len(data))),
        ("bytes=5-99999", (5, len(data))),
    ):
        status, headers, body = server.request("GET", f"/data/{HEX}", headers={"Range": ask})
        assert status == 206 and body == data[span[0] : span[1]], ask
        assert headers["content-range"] == f"bytes {span[0]}-{span[1] - 1}/{len(data)}"
    status, headers, _ = server.request("GET", f"/data/{HEX}", headers={"Range": "bytes=99999-"})
    assert status == 416 and headers["content-range"] == f"bytes */{len(data)}"
    status, _, body = server.request("GET", f"/data/{HEX}", headers={"Range": "bytes=0-1,4-5"})
    assert status == 200 and body == data  # several ranges: the whole object
    assert server.request("GET", f"/snapshots/{HEX}")[0] == 404
    assert server.request("HEAD", "/config")[0] == 404
    assert server.request("PUT", f"/data/{HEX}", b"x")[0] == 405
    files = RestFiles(f"http://127.0.0.1:{server.port}", token=WRITER)
    path = f"{files.root}/data/ab/{HEX}"
    assert files.cat_file(path, 100, 200) == data[100:200]
    assert files.cat_file(path, len(data) - 10) == data[-10:]
    assert files.cat_file(path, len(data) + 5) == b""
    assert files.find(f"{files.root}/data", detail=True)[path]["size"] == len(data)
    assert not files.exists(f"{files.root}/snapshots/x") and files.exists(path)
    with pytest.raises(FileNotFoundError):
        files.cat_file(f"{files.root}/index/{HEX}")
    # A write-only store's chunk-id files (ids/) are served beside restic's types.
    assert files.exists(f"{files.root}/ids") and files.find(f"{files.root}/ids") == []
    files.pipe_file(f"{files.root}/ids/{HEX}", b"ids")
    assert files.find(f"{files.root}/ids") == [f"{files.root}/ids/{HEX}"]
    assert files.cat_file(f"{files.root}/ids/{HEX}") == b"ids"
    files.close()


# -- limits -------------------------------------------------------------------------------------


def server_peak_kib(server: Server) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")  # pragma: no cover


def test_an_upload_streams_to_disk_in_bounded_memory(server: Server) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    size, piece = 256 << 20, os.urandom(1 << 20)
    before = server_peak_kib(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request(
        "POST",
        f"/data/{HEX}",
        body=(piece for _ in range(size // len(piece))),
        headers={"Authorization": f"Bearer {WRITER}", "Content-Length": str(size)},
    )
    assert conn.getresponse().status == 200
    conn.close()
    assert (server.root / "data" / "ab" / HEX).stat().st_size == size
    grown = server_peak_kib(server) - before
    assert grown < 32 << 10, f"the server's peak grew by {grown} KiB for a 256 MiB upload"
    status, _, body = server.request("GET", f"/data/{HEX}", headers={"Range": "bytes=-1048576"})
    assert status == 206 and body == piece
    assert server_peak_kib(server) - before < 32 << 10


def test_oversized_and_stalled_bodies_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    running = start_server(tmp_path, "--max-object-size", "100000", "--body-timeout", "1")
    try:
        assert running.request("POST", "/?create=true")[0] == 200
        assert running.request("POST", f"/data/{HEX}", os.urandom(100_001))[0] == 413
        assert running.request("POST", f"/data/{HEX}", os.urandom(100_000))[0] == 200
        # A body that stops arriving: 408 after the timeout, and its temporary is gone.
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            sock.sendall(
                f"POST /index/{HEX} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                "Content-Length: 5000\r\n\r\n".encode()
                + b"x" * 100
            )
            started = time.monotonic()
            answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert time.monotonic() - started < 8
        # A declared length over the limit is refused before any of the body is read.
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            sock.sendall(
                f"POST /index/{HEX} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                "Content-Length: 10000000000\r\n\r\n".encode()
            )
            assert sock.recv(4096).startswith(b"HTTP/1.1 413")
        # A client that goes away in the middle of a body leaves nothing either.
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            sock.sendall(
                f"POST /keys/{HEX} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                "Content-Length: 50000\r\n\r\n".encode()
                + b"y" * 20000
            )
        time.sleep(0.5)
        assert served_files(running.root) == {f"data/ab/{HEX}"}
        assert not any(p.name.startswith(".") for p in running.root.rglob("*"))
        assert running.request("GET", f"/data/{HEX}")[0] == 200  # and it still serves
    finally:
        stop_server(running)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (what it sends is dropped)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(4096):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def half_heads(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that sent half a request line and stopped (the review's PoC)."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /ke")
        socks.append(sock)
    return socks


def test_idle_connections_without_a_token_do_not_starve_clients(server: Server) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    idle = half_heads(server.port, 100)
    idle += [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert server.request("GET", "/keys/")[0] == 200
        assert server.request("POST", f"/keys/{HEX}", b"x")[0] == 200
        assert time.monotonic() - started < 3
        # Raw connections are bounded too: beyond MAX_CONNECTIONS the one that has
        # waited longest for a head is closed to make room, and the new one is served
        # (a new one used to be closed, so anyone holding 512 connections, each
        # renewed every 10 s, kept the owner out).
        idle += half_heads(server.port, _server.MAX_CONNECTIONS - len(idle))
        time.sleep(0.5)
        assert server.request("GET", "/keys/", token=OWNER)[0] == 200
        time.sleep(0.3)
        closed, _, _ = select.select(idle, [], [], 0)  # EOF: readable
        assert len(closed) == 1 and idle.index(closed[0]) < 120  # one of the oldest
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.5)
    assert server.request("GET", f"/keys/{HEX}")[0] == 200


def test_a_request_head_not_sent_in_time_closes_the_connection(server: Server) -> None:
    silent = socket.create_connection(("127.0.0.1", server.port))
    [half] = half_heads(server.port, 1)
    trickle = socket.create_connection(("127.0.0.1", server.port))
    kept = socket.create_connection(("127.0.0.1", server.port))
    pipelined = socket.create_connection(("127.0.0.1", server.port))
    socks = [silent, half, trickle, kept, pipelined]
    try:
        # A connection kept alive after a response gets the same deadline for its next head.
        kept.sendall(
            f"GET /keys/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n\r\n".encode()
        )
        assert kept.recv(4096).startswith(b"HTTP/1.1 ")
        kept.sendall(b"GET /ke")
        pipelined.sendall(
            f"GET /keys/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n\r\nGET /ke".encode()
        )
        started = time.monotonic()
        # Bytes that keep coming do not restart the clock: the head must be whole in time.
        for byte in b"GET /keys/ HTTP/1.1\r\nHost: x\r\n":
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.5)
        limit = _server.HEAD_TIMEOUT + 3 - (time.monotonic() - started)
        assert all(closed_within(sock, limit) for sock in socks)
        assert time.monotonic() - started < _server.HEAD_TIMEOUT + 3
    finally:
        for sock in socks:
            sock.close()
    assert server.request("GET", "/keys/")[0] in (200, 404)


def test_only_requests_with_a_token_count_against_the_limit(server: Server) -> None:
    assert server.request("POST", "/?create=true")[0] == 200
    stalled = []
    try:
        # MAX_REQUESTS uploads with a token whose bodies do not come hold every slot.
        for i in range(_server.MAX_REQUESTS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(
                f"POST /index/{i:064x} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                "Content-Length: 10\r\n\r\n".encode()
            )
            stalled.append(sock)
        deadline = time.monotonic() + 10
        while (status := server.request("GET", "/keys/")[0]) != 503:
            assert status == 200 and time.monotonic() < deadline
        # A request without a token is not counted: 401, and its connection is closed.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /keys/ HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 401")
        _, headers, _ = server.request("GET", "/keys/")
        assert headers.get("retry-after") == "1"
    finally:
        for sock in stalled:
            sock.close()
    deadline = time.monotonic() + 10
    while (status := server.request("GET", "/keys/")[0]) != 200:
        assert status == 503 and time.monotonic() < deadline
        time.sleep(0.1)
    assert not any(p.name.startswith(".") for p in server.root.rglob("*"))


def test_a_server_takes_tokens_that_differ_and_does_not_pickle(tmp_path: Path) -> None:
    import pickle

    from streamcrypt.backup._server import RestServer

    with pytest.raises(InvalidParameterError):
        RestServer(tmp_path)
    with pytest.raises(InvalidParameterError):
        RestServer(tmp_path, token="same", owner_token="same")
    for url in ("ftp://127.0.0.1/", "http:///nohost", "127.0.0.1:8000"):
        with pytest.raises(InvalidParameterError):
            RestFiles(url)
    app = RestServer(tmp_path, token=WRITER, owner_token=OWNER)
    files = RestFiles(f"http://u:{WRITER}@127.0.0.1:1/")
    for obj in (app, files):
        assert WRITER not in repr(obj) and OWNER not in repr(obj)
        with pytest.raises(TypeError):
            pickle.dumps(obj)


# -- restic ----------------------------------------------------------------------------------------


RESTIC = shutil.which("restic")


def test_restic_uses_the_server_as_its_repository(server: Server, tmp_path: Path) -> None:
    assert RESTIC, "`make peers` installs restic (Debian's package)"
    src = make_tree(tmp_path / "src", 4)
    env = {
        **os.environ,
        "RESTIC_PASSWORD": "restic-test-password",
        "RESTIC_CACHE_DIR": str(tmp_path / "cache"),
    }

    def restic(token: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        repo = server.url(token)
        return subprocess.run(
            [RESTIC, "-r", repo, "--no-lock" if args[0] == "snapshots" else "-q", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )

    for args in (("init",), ("backup", str(src)), ("check", "--read-data")):
        done = restic(WRITER, *args)
        assert done.returncode == 0, (args, done.stderr)
    done = restic(WRITER, "restore", "latest", "--target", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    restored = tmp_path / "out" / src.relative_to("/")
    assert tree_bytes(restored) == tree_bytes(src)
    files = served_files(server.root)
    assert any(f.startswith("keys/") for f in files) and any(f.startswith("data/") for f in files)
    assert sorted(p.name for p in server.root.iterdir()) == [
        "config",
        "data",
        "index",
        "keys",
        "locks",
        "snapshots",
    ]  # restic's layout, nothing of the store's

    def snapshots() -> list[Any]:
        done = restic(WRITER, "snapshots", "--json")
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))

    assert len(snapshots()) == 1
    refused = restic(WRITER, "forget", "--prune", "latest", timeout=240)
    assert refused.returncode != 0
    assert len(snapshots()) == 1 and served_files(server.root) >= files - {
        f for f in files if f.startswith("locks/")
    }
    restic(WRITER, "unlock")
    done = restic(OWNER, "forget", "--prune", "latest")
    assert done.returncode == 0, done.stderr
    assert snapshots() == []
    assert not any(f.startswith("snapshots/") for f in served_files(server.root))


def test_an_exclusive_commit_never_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    from streamcrypt.transports import commit_temporary, create_temporary

    dest = tmp_path / "object"
    dest.write_bytes(b"history")
    fd, tmp = create_temporary(str(dest))
    os.write(fd, b"attacker")
    with pytest.raises(FileExistsError):
        commit_temporary(fd, tmp, str(dest), exclusive=True)
    assert dest.read_bytes() == b"history" and os.listdir(tmp_path) == ["object"]
    fd, tmp = create_temporary(str(tmp_path / "new"))
    os.write(fd, b"fresh")
    commit_temporary(fd, tmp, str(tmp_path / "new"), exclusive=True)
    assert sorted(os.listdir(tmp_path)) == ["new", "object"]
    assert (tmp_path / "new").read_bytes() == b"fresh"


def test_the_client_sends_again_on_a_connection_the_server_closed(server: Server) -> None:
    files = RestFiles(f"http://127.0.0.1:{server.port}", token=WRITER)
    files.makedirs(files.root)
    path = f"{files.root}/snapshots/{HEX}"
    files.pipe_file(path, b"first")
    # The kept-alive connection dies while idle (as when the server's keep-alive expires).
    [idle] = files._idle
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)
    files.pipe_file(path, b"first")  # sent again on a new connection: equal, accepted
    assert files.cat_file(path) == b"first"
    [idle] = files._idle
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(AccessDeniedError):
        files.pipe_file(path, b"other")
    files.close()
