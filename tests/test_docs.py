"""The docs stay true: every Python block of README.md and docs/ runs as written; the
quickstart and the guides run section by section as a newcomer follows them (shell lines,
then the programs, servers started in the background on 127.0.0.1 and stopped after);
the shell session of the ``streamcrypt`` command runs; the README's first screen shows
the install line and the two set-up commands; the API reference lists public modules only."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import REPO

DOCS = [
    REPO / "README.md",
    *sorted(
        p
        for p in (REPO / "docs").rglob("*.md")
        if not p.relative_to(REPO / "docs").parts[0].startswith("_")
    ),
]
#: Pages a newcomer follows top to bottom: each ``##`` section runs as one session.
TASK_PAGES = [REPO / "docs" / "quickstart.md", *sorted((REPO / "docs" / "guides").glob("*.md"))]
#: A fenced block: its info string (``python``, ``sh``, ``{include} ../README.md``...) and code.
_FENCE = re.compile(r"^```([^`\n]*)\n(.*?)^```[ \t]*$", flags=re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [
        Block(path, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
        for m in _FENCE.finditer(text)
    ]


ALL = [block for path in DOCS for block in _blocks(path)]
#: Blocks that run on their own (the task pages' blocks run in their sections, below).
PYTHON = [b for b in ALL if b.language == "python" and b.path not in TASK_PAGES]


def _is_cli_session(block: Block) -> bool:
    """A ``sh`` block every command of which is the ``streamcrypt`` command."""
    lines = [ln for ln in block.code.splitlines() if ln.strip() and not ln.startswith("#")]
    return (
        block.language == "sh"
        and bool(lines)
        and all(ln.startswith("streamcrypt ") for ln in lines)
    )


CLI_SESSIONS = [b for b in ALL if _is_cli_session(b) and b.path not in TASK_PAGES]


def test_the_blocks_are_found() -> None:
    """Guards the extraction: a broken pattern must not make the tests below vacuous."""
    readme = [b for b in PYTHON if b.path.name == "README.md"]
    assert len(readme) == 1, [b.name for b in PYTHON]  # the first screen's one example
    assert all(b.code.strip() for b in PYTHON)
    assert any(b.path.name == "overview.md" for b in CLI_SESSIONS)  # the command's session


def _env(*first: Path) -> dict[str, str]:
    """The environment with ``first`` and the venv's scripts (the streamcrypt command)
    first on the PATH, as an activated venv has them."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        [*map(str, first), str(Path(sys.executable).parent), env.get("PATH", "")]
    )
    return env


def _run(
    args: list[str], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env or _env(),
        check=False,
    )


#: ``print(...)  # what it prints``: the comment is the expected output.
_PRINTED = re.compile(r"^\s*print\(.*\)\s*#\s*(.+?)\s*$", flags=re.M)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    """Each block is a complete program: run on its own, in an empty directory, warnings
    as errors; a ``print`` whose comment gives its output must print that."""
    out = _run([sys.executable, "-W", "error", "-c", block.code], tmp_path)
    assert out.returncode == 0, f"{block.name} failed:\n{out.stderr}"
    for expected in _PRINTED.findall(block.code):
        assert expected in out.stdout, (block.name, expected, out.stdout)


def test_readme_examples_state_their_output() -> None:
    readme = [b for b in PYTHON if b.path.name == "README.md"]
    assert "268435456 bytes round-tripped" in _PRINTED.findall(readme[0].code)


@pytest.mark.parametrize("block", CLI_SESSIONS, ids=lambda b: b.name)
def test_cli_session_runs(block: Block, tmp_path: Path) -> None:
    """The shell session runs line by line (``set -e``) on a small input file."""
    (tmp_path / "notes.txt").write_text("meet at noon\n")
    out = _run(["bash", "-euo", "pipefail", "-c", block.code], tmp_path)
    assert out.returncode == 0, f"{block.name} failed:\n{out.stderr}"
    assert "meet at noon" in out.stdout  # a decryption to standard output came back


def test_readme_first_screen_has_the_install_line_the_two_commands_and_one_example() -> None:
    """What it is, ``pip install streamcrypt``, ``make demo`` and ``make test`` (in that
    order, nothing else to type), and one example; the tables live on the site."""
    lines = (REPO / "README.md").read_text().splitlines()
    first_screen = [b for b in _blocks(REPO / "README.md") if b.line <= 40]
    shell = [b for b in first_screen if b.language == "sh"]
    commands = [ln.split("#")[0].strip() for b in shell for ln in b.code.splitlines() if ln.strip()]
    assert commands == ["pip install streamcrypt", "make demo", "make test"]
    assert [b.language for b in first_screen] == ["sh", "sh", "python"]
    assert not any(ln.startswith("|") for ln in lines), "tables belong on the site"


def test_readme_points_to_the_command_its_reference_and_the_guides() -> None:
    readme = (REPO / "README.md").read_text()
    assert "`streamcrypt` command" in readme and "docs/CLI.md" in readme
    for page in ["docs/quickstart.md", *(f"docs/guides/{p.name}" for p in TASK_PAGES[1:])]:
        assert f"({page})" in readme, page


def test_the_examples_page_shows_every_example() -> None:
    page = (REPO / "docs" / "examples.md").read_text()
    for example in sorted((REPO / "examples").glob("*.py")):
        assert f"{{literalinclude}} ../examples/{example.name}" in page, example.name


#: A Markdown link: ``[text](target)``.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files_of_the_repository(path: Path) -> None:
    """A link to a page or file that is not there (an ARCHITECTURE document, say) is a
    dead end on the site and on GitHub alike."""
    for target in _LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        assert (path.parent / target.split("#")[0]).exists(), (path.name, target)


SITE_PAGES = [p for p in DOCS if p.parent != REPO]


@pytest.mark.parametrize("path", SITE_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_site_pages_link_pages_by_name_not_by_repository_path(path: Path) -> None:
    """On the site a page is a link with a title, not the text "docs/FORMAT.md"."""
    assert not re.findall(r"\bdocs/\w+\.md", path.read_text()), path.name


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (REPO / ".ci" / "run").read_text()


#: Modules only an extra installs (pyproject.toml's optional dependencies).
_EXTRA_MODULES = [
    "aiohttp",
    "starlette",
    "rich",
    "fsspec",
    "zstandard",
    "pyfastcdc",
    "dask",
    "distributed",
    "matplotlib",
    "Crypto",
    "argon2",
    "coincurve",
    "sphinx",
]


def test_make_demo_installs_the_package_alone_and_the_demo_needs_no_more() -> None:
    """``make demo`` builds the venv with no extra (``make test`` with all of them), and
    the demo imports no module an extra brings."""
    makefile = (REPO / "Makefile").read_text()
    demo = re.search(r"^demo: (.+)$", makefile, flags=re.M)
    assert demo is not None and demo.group(1).strip() == "$(DEMO_STAMP)"
    recipe = re.search(r"^\$\(DEMO_STAMP\):.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe is not None and "$(call install,)" in recipe.group(1)
    assert re.search(r"^test: \$\(STAMP\)$", makefile, flags=re.M)
    probe = (
        "import runpy, sys; sys.argv = ['demo', '--mib', '1'];"
        "runpy.run_path('examples/demo.py', run_name='__main__');"
        f"print(sorted(m for m in {_EXTRA_MODULES!r} if m in sys.modules))"
    )
    out = _run([sys.executable, "-c", probe], REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_demo_runs_end_to_end_and_checks_hashes(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "examples/demo.py", "--mib", "8"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert "all checks passed" in out.stdout
    assert "64 random-access reads verified" in out.stdout
    hashes = [line.split()[-1] for line in out.stdout.splitlines() if "BLAKE3" in line]
    assert len(hashes) == 3 and len(set(hashes)) == 1


# The quickstart and the guides, section by section -------------------------------------

#: ``# name.py: how to run it``, the first line of a program a task page saves and runs;
#: "until Ctrl-C" there marks a server, started in the background.
_PROGRAM = re.compile(r"^# (\w+\.py)\b(.*)$")
#: The one port the task pages' servers listen on; each run substitutes a free one.
DOC_PORT = "8765"
#: ``command  # prints: text``: a shell line whose output must contain the text.
_SHELL_PRINTS = re.compile(r"#\s*prints:\s*(.+?)\s*$")


@dataclass(frozen=True)
class Section:
    path: Path
    title: str
    blocks: tuple[Block, ...]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}#{self.title}"


def _sections(path: Path) -> list[Section]:
    text = path.read_text()
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^## (.+)$", text, flags=re.M)]
    bounds = [*heads, (len(text) + 1, "")]
    blocks = _blocks(path)
    found = []
    for (start, title), (end, _) in itertools.pairwise(bounds):
        first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1
        mine = tuple(b for b in blocks if first <= b.line < last and b.language in ("python", "sh"))
        if any(b.language == "python" or _shell_lines(b) for b in mine):
            found.append(Section(path, title, mine))
    return found


def _shell_lines(block: Block) -> list[str]:
    """A shell block's commands, but the install lines (the test venv has everything)."""
    lines = [ln for ln in block.code.splitlines() if ln.strip() and not ln.startswith("#")]
    return [ln for ln in lines if not ln.lstrip().startswith("pip install")]


SECTIONS = [s for page in TASK_PAGES for s in _sections(page)]


def _uses_age(section: Section) -> bool:
    """The section runs the ``age`` command (or ``age-keygen``)."""
    code = "\n".join(ln for b in section.blocks if b.language == "sh" for ln in _shell_lines(b))
    return bool(re.search(r"(^|[|;&]\s*)age(-keygen)?\s", code, flags=re.M))


#: Who plays the ``age`` command in a section that runs it: the real one (a peer
#: installed from Debian by the Makefile's ``peers``, as ``make test`` runs) and rage through
#: pyrage, the test suite's age peer (tests/age_via_pyrage.py), on every machine.
AGE_COMMANDS = ["age", "pyrage"]
SECTION_RUNS = [
    pytest.param(s, who, id=f"{s.name}[{who}]" if who else s.name)
    for s in SECTIONS
    for who in (AGE_COMMANDS if _uses_age(s) else [None])
]


def _age_via_pyrage(directory: Path) -> Path:
    """``age`` and ``age-keygen`` scripts in ``directory`` that run tests/age_via_pyrage.py."""
    directory.mkdir()
    shim = REPO / "tests" / "age_via_pyrage.py"
    for name in ("age", "age-keygen"):
        script = directory / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{shim}" {name} "$@"\n')
        script.chmod(0o755)
    return directory


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(server: subprocess.Popen[str], port: int, name: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            _, err = server.communicate()
            pytest.fail(f"{name} exited with {server.returncode} before listening:\n{err}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{name} did not listen on 127.0.0.1:{port} within 60 s")


def _stop(server: subprocess.Popen[str]) -> None:
    """Ctrl-C, as the reader stops it; killed if that does not stop it."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
    try:
        server.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()


def test_the_task_pages_have_sections() -> None:
    """Guards the extraction: every task page runs, the quickstart all five tasks with
    both processes of the two-process ones."""
    assert {s.path for s in SECTIONS} == set(TASK_PAGES)
    quick = [s for s in SECTIONS if s.path.name == "quickstart.md"]
    assert len(quick) == 5, [s.title for s in quick]
    servers = [b for s in quick for b in s.blocks if "until Ctrl-C" in b.code.split("\n", 1)[0]]
    assert len(servers) == 2


@pytest.mark.parametrize(("section", "age"), SECTION_RUNS)
def test_task_section_runs(
    section: Section, age: str | None, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The section's blocks in order in one empty directory, as a reader types them:
    shell blocks with bash; ``# name.py`` programs saved and run (servers in the
    background, stopped at the end); other Python blocks run as they are. Every printed
    line with a comment giving its output must print that."""
    if age == "age":  # a peer never missing: make test installs it (the Makefile's peers)
        assert shutil.which("age") and shutil.which("age-keygen"), "`make peers` installs age"
    shims = [_age_via_pyrage(tmp_path_factory.mktemp("shims") / "bin")] if age == "pyrage" else []
    env = _env(*shims)
    port = str(_free_port())
    servers: list[tuple[subprocess.Popen[str], str]] = []
    try:
        for block in section.blocks:
            code = block.code.replace(DOC_PORT, port)
            if block.language == "sh":
                lines = _shell_lines(block)
                if not lines:
                    continue
                for line in lines:
                    out = _run(["bash", "-euo", "pipefail", "-c", line], tmp_path, env=env)
                    assert out.returncode == 0, f"{block.name}: {line}\n{out.stderr}"
                    expected = _SHELL_PRINTS.search(line)
                    if expected:
                        assert expected.group(1) in out.stdout, (block.name, line, out.stdout)
                continue
            program = _PROGRAM.match(code.split("\n", 1)[0])
            args = [sys.executable, "-u", "-W", "error"]
            if program is None:
                args += ["-c", code]
            else:
                (tmp_path / program.group(1)).write_text(code)
                args.append(program.group(1))
                if "until Ctrl-C" in program.group(2):
                    assert DOC_PORT in block.code, f"{block.name}: a server listens on {DOC_PORT}"
                    server = subprocess.Popen(
                        args,
                        cwd=tmp_path,
                        env=env,
                        text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                    servers.append((server, block.name))
                    _wait_for_port(server, int(port), block.name)
                    continue
            out = _run(args, tmp_path, env=env)
            assert out.returncode == 0, f"{block.name} failed:\n{out.stderr}"
            for expected in _PRINTED.findall(block.code):
                assert expected in out.stdout, (block.name, expected, out.stdout)
        for server, name in servers:  # served every client and still serves
            assert server.poll() is None, f"{name} stopped:\n{server.communicate()[1]}"
    finally:
        for server, _ in servers:
            _stop(server)


# The API reference ----------------------------------------------------------------------


def _api_modules() -> list[str]:
    """The modules docs/api.md gives a page (its autosummary entries)."""
    text = (REPO / "docs" / "api.md").read_text()
    return re.findall(r"^   (streamcrypt[\w.]*)$", text, flags=re.M)


def _api_pages() -> Any:
    """The site's extension (docs/_ext/api_pages.py), which decides what each page shows."""
    sys.path.insert(0, str(REPO / "docs" / "_ext"))
    try:
        import api_pages
    finally:
        sys.path.remove(str(REPO / "docs" / "_ext"))
    return api_pages


def _api_plan() -> tuple[dict[str, Any], dict[str, str]]:
    """What the site's extension puts on each page, and the modules it leaves out."""
    api_pages = _api_pages()
    return dict(api_pages.plan()), dict(api_pages.NOT_API)


def test_signatures_name_types_by_their_public_path() -> None:
    """A dataclass's annotations name private modules (``codecs._format``); the reference
    shows the public name, and leaves a name no public module exports as it is."""
    public_text = _api_pages()._public_text
    sig = "(derive: ~Callable[[~streamcrypt.codecs._format.FormatOptions], ~streamcrypt.backup._store.Location])"
    assert (
        public_text(sig)
        == "(derive: ~Callable[[~streamcrypt.codecs.FormatOptions], ~streamcrypt.backup.Location])"
    )
    assert (
        public_text("streamcrypt.codecs._format.not_exported")
        == "streamcrypt.codecs._format.not_exported"
    )


def test_the_api_reference_lists_public_library_modules_only() -> None:
    """No private module (``_lazy``, ``_demo``, ``cli._parser``...) and not the command's
    entry point; every public library module has its page (sphinx -W checks the names)."""
    listed = _api_modules()
    plan, not_api = _api_plan()
    assert listed and len(listed) == len(set(listed))
    assert [m for m in listed if any(p.startswith("_") for p in m.split("."))] == []
    assert not set(listed) & set(not_api)
    assert set(listed) == set(plan)


def test_the_top_level_names_are_documented_on_the_top_level_page() -> None:
    plan, _ = _api_plan()
    top = plan["streamcrypt"].members
    for name in ["open", "KeyRing", "SecretKey", "serve", "connect"]:
        assert name in top, name
    for name in ["encrypt", "decrypt", "encrypt_bytes", "decrypt_bytes"]:
        assert name in top, name
    keys = plan["streamcrypt.keys"]
    assert ("KeyRing", "streamcrypt.KeyRing") in keys.aliases


def test_the_task_pages_use_public_names_only() -> None:
    """What a newcomer copies from the Quickstart and the guides imports nothing private
    (no ``streamcrypt._demo``, ``streamcrypt.cli._io``, ``_AIOHTTP_NAMES``...)."""
    private = re.compile(r"streamcrypt(\.\w+)*\._\w+|from streamcrypt[\w.]* import .*\b_\w+")
    blocks = [b for s in SECTIONS for b in s.blocks if b.language == "python"]
    assert blocks
    for block in blocks:
        assert not private.search(block.code), (block.name, private.search(block.code))


def _toctrees(path: Path) -> list[tuple[str, list[str]]]:
    """Each toctree of a page: its caption and its entries, in order."""
    found = []
    for block in _blocks(path):
        if block.language == "{toctree}":
            caption = re.search(r"^:caption: (.+)$", block.code, flags=re.M)
            entries = [
                ln.strip()
                for ln in block.code.splitlines()
                if ln.strip() and not ln.startswith(":")
            ]
            found.append((caption.group(1) if caption else "", entries))
    return found


def test_the_site_opens_on_the_quickstart_then_the_guides_and_ends_with_the_internals() -> None:
    """The sidebar as the anchors order it: how-to first, tables after, specs apart."""
    trees = _toctrees(REPO / "docs" / "index.md")
    captions = [caption for caption, _ in trees]
    assert (
        captions[:2] == ["Getting started", "Guides"]
        and captions[-1] == "Specifications and internals"
    )
    assert trees[0][1] == ["quickstart"]
    assert sorted(f"guides/{p.stem}" for p in TASK_PAGES[1:]) == sorted(
        e for e in trees[1][1] if e.startswith("guides/")
    )
    internals = {"FORMAT", "FORMATS", "BACKUP", "CLUSTER", "ENGINE", "FUZZING", "SEEDS"}
    assert set(trees[-1][1]) == internals
    assert not internals & {e for _, entries in trees[:-1] for e in entries}
    about = dict(trees)["About"]
    assert "comparison" in about and "benchmarks" in about
    listed = {e for _, entries in trees for e in entries}
    pages = {str(p.relative_to(REPO / "docs").with_suffix("")) for p in SITE_PAGES}
    assert pages - listed == {"index"}, "every page is in the sidebar"


def test_the_api_reference_names_no_missing_document() -> None:
    """docs/api.md once sent the reader to an ARCHITECTURE document the repository lacks."""
    text = (REPO / "docs" / "api.md").read_text()
    for word in set(re.findall(r"\b[A-Z]{5,}\b", text)):
        assert (REPO / "docs" / f"{word}.md").exists() or (REPO / f"{word}.md").exists(), word


def test_site_pages_show_the_examples_rather_than_download_them() -> None:
    for path in SITE_PAGES:
        assert not re.search(r"\]\([./]*examples/\w+\.py\)", path.read_text()), path.name


def test_make_test_fails_a_run_in_which_a_test_skipped(tmp_path: Path) -> None:
    """``make test`` sets STREAMCRYPT_NO_SKIPS=1, under which the suite's conftest turns
    any skip (a peer or an extra missing) into a failed run; without it a skip passes."""
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe is not None
    assert "STREAMCRYPT_NO_SKIPS=1 $(BIN)/python -m pytest" in recipe.group(1)
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(REPO / "tests" / "support.py", tmp_path / "support.py")
    (tmp_path / "test_peer.py").write_text(
        "import pytest\n\ndef test_needs_a_peer():\n    pytest.skip('the peer is missing')\n"
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    for value, code in (("1", 1), ("", 0)):
        env = {**os.environ, "STREAMCRYPT_NO_SKIPS": value, "PYTHONPATH": str(tmp_path)}
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == code, done.stdout + done.stderr
