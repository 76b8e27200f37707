"""The store server's request limits (review 7 L1, L5), driven as an ASGI app: a writer's
token holding every request it may, or trickling a body a byte at a time, never keeps
the owner out; a Range header the server cannot read is answered, not a 500. The server
under real uvicorn is tested in test_rest_server.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from streamcrypt.backup import _server
from streamcrypt.backup._server import RestServer

WRITER, OWNER = "writer-token-5f1c", "owner-token-9a7e"
Message = dict[str, Any]


def scope(method: str, path: str, token: str, **headers: str) -> dict[str, Any]:
    sent = [(b"authorization", f"Bearer {token}".encode())]
    sent += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "method": method, "path": path, "headers": sent}


async def call(
    app: RestServer, method: str, path: str, token: str, receive: Callable[[], Awaitable[Message]]
) -> int:
    """The status ``app`` answers."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope(method, path, token), receive, send)
    return int(sent[0]["status"])


async def nothing() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def served(tmp_path: Path, **limits: Any) -> RestServer:
    (tmp_path / "config").write_bytes(b"{}")
    return RestServer(tmp_path, token=WRITER, owner_token=OWNER, **limits)


@pytest.mark.anyio
async def test_writers_holding_every_request_leave_the_owner_a_slot(tmp_path: Path) -> None:
    app = served(tmp_path)
    release = anyio.Event()
    answers: list[int] = []

    async def stalled() -> Message:  # a body that does not come (as slowly as it may)
        await release.wait()
        return {"type": "http.request", "body": b"x", "more_body": False}

    async def upload(i: int) -> None:
        answers.append(await call(app, "POST", f"/keys/k{i}", WRITER, stalled))

    async with anyio.create_task_group() as tg:
        for i in range(_server.MAX_REQUESTS):
            tg.start_soon(upload, i)
        await anyio.wait_all_tasks_blocked()
        for _ in range(8):  # the owner's reads all get in
            assert await call(app, "GET", "/config", OWNER, nothing) == 200
        release.set()
    writers = _server.MAX_REQUESTS - _server.OWNER_REQUESTS
    assert answers.count(200) == writers and answers.count(503) == _server.OWNER_REQUESTS


@pytest.mark.anyio
async def test_a_body_trickled_a_byte_per_piece_is_cut_off(tmp_path: Path) -> None:
    """Each piece comes well within body_timeout; the whole falls behind the minimum
    rate: 408 soon after body_timeout, its temporary removed."""
    app = served(tmp_path, body_timeout=0.3)

    async def trickle() -> Message:
        await anyio.sleep(0.02)
        return {"type": "http.request", "body": b"x", "more_body": True}

    with anyio.fail_after(5):
        started = anyio.current_time()
        assert await call(app, "POST", "/keys/slow", WRITER, trickle) == 408
    assert anyio.current_time() - started < 2
    assert files(tmp_path) == ["config"]


@pytest.mark.anyio
async def test_a_body_at_the_minimum_rate_is_taken(tmp_path: Path) -> None:
    app = served(tmp_path, body_timeout=0.2, min_body_rate=100_000)
    pieces = iter(range(20))

    async def steady() -> Message:  # 2,000 bytes every 10 ms: 200 kB/s
        await anyio.sleep(0.01)
        return {"type": "http.request", "body": b"y" * 2000, "more_body": next(pieces) < 19}

    assert await call(app, "POST", "/keys/steady", WRITER, steady) == 200
    assert files(tmp_path) == ["config", "keys/steady"]
    assert (tmp_path / "keys" / "steady").stat().st_size == 40_000


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "status"),
    [
        ("bytes=" + "9" * 5000 + "-", 416),
        ("bytes=-" + "1" * 5000, 206),
        ("bytes=0-" + "7" * 4400, 206),
    ],
)
async def test_a_range_of_thousands_of_digits_is_answered(
    tmp_path: Path, value: str, status: int
) -> None:
    app = served(tmp_path)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    for method in ("GET", "HEAD"):
        sent.clear()
        await app(scope(method, "/config", WRITER, range=value), nothing, send)
        assert sent[0]["status"] == (status if method == "GET" else 200)


def test_an_upgrade_request_never_leaves_the_bounded_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn hands an ``Upgrade: websocket`` request to its websockets protocol when
    that package is installed, outside the limits of BoundedH11: the config says none."""
    import uvicorn

    configs: list[Any] = []

    class Recorded:
        def __init__(self, config: Any) -> None:
            configs.append(config)

        def run(self, sockets: Any) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Server", Recorded)
    RestServer(tmp_path, token="w" * 32).serve(None)  # type: ignore[arg-type]
    (config,) = configs
    assert config.ws == "none" and config.lifespan == "off"
    assert config.http.__name__ == "BoundedH11"
