"""``python -m streamcrypt``: the ``streamcrypt`` command (see docs/CLI.md)."""

from __future__ import annotations

from .cli import run

if __name__ == "__main__":
    run()
