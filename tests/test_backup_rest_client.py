"""The store's REST client and its credentials (review 7 L2, L3): a token need not be on
the command line (a file or the environment), and a URL whose token holds '/', '?' or
'#' not percent-encoded is refused without a byte of it shown."""

from __future__ import annotations

import os
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
    assert RestFiles("http://me:a%2Fb%40c@h:1/p/").root == "http://h:1/p"


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
