"""The coverage-guided engine: atheris (libFuzzer) drives one target's harness.

streamcrypt is imported inside ``atheris.instrument_imports`` so libFuzzer sees its
branch coverage. libFuzzer owns the limits here: ``-timeout`` (10 s, a hang),
``-rss_limit_mb`` (2 GiB) and ``-max_len``; the harness still reports calls over its
1 s soft limit, untyped exceptions, chunking disagreements and, with ``--diff``, the
peers' disagreements. libFuzzer ends the process at ``-max_total_time``, so the figures
are saved every two seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .__main__ import Session

__all__ = ["fuzz"]


def fuzz(target: str, diff: bool, seeds: list[bytes], seconds: float) -> None:
    import atheris

    with atheris.instrument_imports(include=["streamcrypt"]):
        import streamcrypt  # noqa: F401

        from . import targets  # noqa: F401  (imports every codec)

    from .__main__ import WORK, Session

    session: Session = Session(target, diff)
    work = WORK / "corpus" / target
    work.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(seeds):
        (work / f"seed-{i:03}").write_bytes(data)
    last_save = time.monotonic()

    def one(data: bytes) -> None:
        nonlocal last_save
        session.one(data)
        if time.monotonic() - last_save > 2:
            session.save("atheris")
            last_save = time.monotonic()

    argv = [
        sys.argv[0],
        str(work),
        f"-max_total_time={int(seconds)}",
        "-timeout=10",
        "-rss_limit_mb=2048",
        f"-max_len={session.target.max_len}",
        "-print_final_stats=1",
    ]
    atheris.Setup(argv, one)
    atheris.Fuzz()
