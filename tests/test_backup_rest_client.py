"""The store's REST client and its credentials (review 7 L2, L3): a token need not be on
the command line (a file or the environment), and a URL whose token holds '/', '?' or
'#' not percent-encoded is refused without a byte of it shown."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from test_cli import sc
from test_rest_server import KEY, OWNER, WRITER, run, start_server, stop_server

from streamcrypt import backup as sb
from streamcrypt.backup._rest import TOKEN_FILE_VARIABLE, TOKEN_VARIABLE, RestFiles
from streamcrypt.errors import InvalidParameterError

SECRET = "S3CRETtokenREST"


@pytest.mark.parametrize(
    "url",
    [
        f"http://me:4711/{SECRET}@127.0.0.1:9/",
        f"http://me:Zm9v/{SECRET}@127.0.0.1:9/",
        f"http://me:Zm9vYmFy#{SECRET}@127.0.0.1:9/",
        f"http://me:Zm9v?{SECRET}@127.0.0.1:9/",
        f"http://me:{SECRET}@127.0.0.1:port{SECRET}/",
    ],
)
def test_a_url_whose_token_is_not_percent_encoded_is_refused_unshown(url: str) -> None:
    assert sb.shown_location("rest:" + url) == "rest:http://..."
    assert sb.shown_location("s3://" + url.removeprefix("http://")) == "s3://..."
    with pytest.raises(InvalidParameterError, match="percent-encode") as raised:
        RestFiles(url)
    with pytest.raises(InvalidParameterError, match="percent-encode") as listed:
        run(sb.list_snapshots, "rest:" + url)
    for exc in (raised.value, listed.value):
        assert not any(part in str(exc) for part in ("Zm9v", "4711", SECRET))
        assert exc.__context__ is None and exc.__cause__ is None


def test_a_percent_encoded_token_still_opens(tmp_path: Path) -> None:
    assert sb.shown_location("rest:http://me:a%2Fb%40c@h:1/p") == "rest:http://h:1/p"
    with pytest.warns(UserWarning, match="clear text"):
        assert RestFiles("http://me:a%2Fb%40c@h:1/p/").root == "http://h:1/p"


@pytest.mark.parametrize(
    "token", [f"{SECRET}\n{SECRET}", f"{SECRET}\r\nX-Injected: 1", f"{SECRET}\x7f"]
)
def test_a_token_with_a_control_character_is_refused_unshown(
    token: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A token holding a line break (``$(cat tokenfile)``) used to reach http.client,
    whose ValueError quoted the whole header (review 8b L1)."""
    monkeypatch.setenv(TOKEN_VARIABLE, token)
    for make in (
        lambda: RestFiles("http://127.0.0.1:9/", token=token),
        lambda: RestFiles("http://127.0.0.1:9/"),
        lambda: RestFiles("http://me@127.0.0.1:9/"),
    ):
        with pytest.raises(InvalidParameterError, match="control character") as refused:
            make()
        assert SECRET not in str(refused.value) and refused.value.__context__ is None
    done = sc("backup", "snapshots", "rest:http://127.0.0.1:9/", cwd=tmp_path)
    assert done.returncode != 0 and SECRET.encode() not in done.stdout + done.stderr


def test_a_request_http_client_refuses_is_raised_without_its_text() -> None:
    files = RestFiles("http://127.0.0.1:9/", token="fine")
    with pytest.raises(InvalidParameterError, match="not sent") as refused:
        files._request("GET", "/config", headers={"X-Other": f"{SECRET}\nX: 1"})
    assert SECRET not in str(refused.value) and refused.value.__context__ is None


@pytest.mark.parametrize(
    ("url", "warns"),
    [
        ("http://me:PW4711@192.0.2.2:9/", True),
        ("http://me:PW4711@backup-host:9/", True),
        ("http://me:PW4711@127.0.0.1:9/", False),
        ("http://me:PW4711@127.3.4.5:9/", False),
        ("http://me:PW4711@[::1]:9/", False),
        ("http://me:PW4711@localhost:9/", False),
        ("https://me:PW4711@192.0.2.2:9/", False),
        ("http://192.0.2.2:9/", False),  # no credentials
    ],
)
def test_a_token_sent_in_clear_beyond_loopback_is_warned_of(url: str, warns: bool) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        RestFiles(url)
    texts = [str(w.message) for w in seen]
    assert len(texts) == warns
    assert all("clear text" in t and "PW4711" not in t for t in texts)


def test_the_client_takes_its_token_from_a_file_or_the_environment(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    running = start_server(tmp_path / "server")
    try:
        src = tmp_path / "src"
        src.mkdir()
        (src / "a.txt").write_text("through the server\n")
        run(sb.create_store, running.url(), KEY)
        report = run(sb.backup, src, running.url(), KEY)
        bare = f"rest:http://127.0.0.1:{running.port}/"
        token_file = tmp_path / "owner.token"
        token_file.write_text(OWNER + "\n")
        os.chmod(token_file, 0o600)
        for env, url in [
            ({TOKEN_FILE_VARIABLE: str(token_file)}, bare),
            ({TOKEN_VARIABLE: WRITER}, bare),
            ({TOKEN_FILE_VARIABLE: str(token_file)}, bare.replace("//", "//me@")),
        ]:
            done = sc("backup", "snapshots", url, cwd=tmp_path, env=env)
            assert done.returncode == 0, (env, done.stderr)
            assert done.stdout.decode().split() == [report.snapshot]
        clean = {TOKEN_FILE_VARIABLE: "", TOKEN_VARIABLE: ""}
        done = sc("backup", "snapshots", bare, cwd=tmp_path, env=clean)
        assert done.returncode == 1 and b"refused the credentials" in done.stderr
        (tmp_path / "empty.token").write_text("\n")
        os.chmod(tmp_path / "empty.token", 0o600)
        empty = {TOKEN_FILE_VARIABLE: str(tmp_path / "empty.token")}
        done = sc("backup", "snapshots", bare, cwd=tmp_path, env=empty)
        assert done.returncode == 2 and b"holds no token" in done.stderr
    finally:
        stop_server(running)
