"""The docs stay true: every Python block of README.md and docs/*.md runs as written, the
README's shell session of the ``streamcrypt`` command runs, and the first screen shows the
two set-up commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
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
PYTHON = [b for b in ALL if b.language == "python"]


def _is_cli_session(block: Block) -> bool:
    """A ``sh`` block every command of which is the ``streamcrypt`` command."""
    lines = [ln for ln in block.code.splitlines() if ln.strip() and not ln.startswith("#")]
    return (
        block.language == "sh"
        and bool(lines)
        and all(ln.startswith("streamcrypt ") for ln in lines)
    )


CLI_SESSIONS = [b for b in ALL if _is_cli_session(b)]


def test_the_blocks_are_found() -> None:
    """Guards the extraction: a broken pattern must not make the tests below vacuous."""
    readme = [b for b in PYTHON if b.path.name == "README.md"]
    assert len(readme) >= 4, [b.name for b in PYTHON]
    assert all(b.code.strip() for b in PYTHON)
    assert any(b.path.name == "README.md" for b in CLI_SESSIONS)


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The venv's scripts (the streamcrypt command) first, as an activated venv has them.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, check=False
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


def test_readme_first_screen_has_exactly_the_two_commands() -> None:
    first_screen = "\n".join((REPO / "README.md").read_text().splitlines()[:40])
    shell = [b for b in _blocks(REPO / "README.md") if b.language == "sh" and b.line <= 40]
    assert len(shell) == 1 and "make demo" in first_screen and "make test" in first_screen
    commands = [ln.split("#")[0].strip() for ln in shell[0].code.splitlines() if ln.strip()]
    assert commands == ["make demo", "make test"]


def test_readme_points_to_the_command_its_reference_and_the_examples() -> None:
    readme = (REPO / "README.md").read_text()
    assert "`streamcrypt` command" in readme and "docs/CLI.md" in readme
    for example in sorted((REPO / "examples").glob("*.py")):
        assert f"examples/{example.name}" in readme, example.name


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_demo_runs_end_to_end_and_checks_hashes(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "streamcrypt._demo", "--mib", "8"],
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
