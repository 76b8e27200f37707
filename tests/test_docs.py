"""The docs stay true: the README's example runs, and it shows the two set-up commands."""

from __future__ import annotations

import re
import subprocess
import sys

from support import REPO


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join((REPO / "README.md").read_text().splitlines()[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def test_readme_example_runs() -> None:
    block = _python_blocks((REPO / "README.md").read_text())[0]
    out = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    assert "268435456 bytes round-tripped" in out.stdout


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_demo_runs_end_to_end_and_checks_hashes(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "streamcrypt.demo", "--mib", "8"],
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


def test_seeds_page_example_runs() -> None:
    block = _python_blocks((REPO / "docs" / "SEEDS.md").read_text())[0]
    out = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
