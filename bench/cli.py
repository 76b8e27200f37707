"""Issue 18: the ``streamcrypt`` command against the ``age`` command, whole commands timed.

The same age-format work through both commands, one process per run, start-up included:
encrypt and decrypt, binary and armored, to a file (``-o``) and to ``/dev/null``, on
1 GiB (``--quick``: 128 MiB) of random data in a temporary directory on disk; and the
start-up of ``--version`` and ``--help``. The two commands alternate run by run, so a
shared machine's load falls on both alike; each row gives medians and the ratio.
``BENCH_BASELINE_TREE=path`` adds a third command, streamcrypt from another source tree
(an export of main), alternated with the two: a before/after of a change in one run.

``age`` is a bench-only peer, not a Python package: ``apt-get install age`` (Debian and
Ubuntu), ``brew install age``, or a release from https://github.com/FiloSottile/age.
Without it the age rows are skipped and only streamcrypt's times are given.

streamcrypt runs as installed (the ``streamcrypt`` script beside this interpreter) with
bytecode caching allowed, as an installed wheel runs; ``PYTHONDONTWRITEBYTECODE`` is
dropped for the children, and one untimed run first writes the caches.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ._report import Report, Table

#: Start-up the issue asks of ``--help`` / ``--version``.
STARTUP_TARGET_MS = 50


def _streamcrypt_argv() -> list[str]:
    script = Path(sys.executable).with_name("streamcrypt")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamcrypt"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    return env


def _timed(argv: Sequence[str], env: dict[str, str], check: bool = True) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t0
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}... failed: {done.stderr.decode()[-300:]}")
    return seconds


#: Another source tree to time beside this one, run by run (``BENCH_BASELINE_TREE=path``,
#: e.g. an export of main): its rows get a "before" column, alternated with the others.
BASELINE = os.environ.get("BENCH_BASELINE_TREE")


def _env_for(name: str, env: dict[str, str]) -> dict[str, str]:
    if name == "before" and BASELINE:
        return {**env, "PYTHONPATH": BASELINE}
    return env


def _alternate(
    commands: dict[str, list[str]], env: dict[str, str], rounds: int, cleanup: Path | None
) -> dict[str, float]:
    """Median seconds of each command, run in turn ``rounds`` times, each after an
    untimed ``sync`` (the writeback of an earlier run's output otherwise runs on the
    cores the next run is timed on)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            os.sync()
            times[name].append(_timed(argv, _env_for(name, env)))
            if cleanup is not None:
                cleanup.unlink(missing_ok=True)
    return {name: statistics.median(t) for name, t in times.items()}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _row(t: Table, what: str, size: int, medians: dict[str, float]) -> None:
    ours = medians["streamcrypt"]
    theirs = medians.get("age")
    before = medians.get("before")
    t.add(
        what,
        f"{ours:.2f}",
        f"{size / ours / 1e9:.2f}",
        "—" if theirs is None else f"{theirs:.2f}",
        "—" if theirs is None else f"{size / theirs / 1e9:.2f}",
        "—" if theirs is None else f"{theirs / ours:.2f}×",
        *(() if not BASELINE else ("—" if before is None else f"{before:.2f}",)),
        *(() if not BASELINE or before is None else (f"{before / ours:.2f}×",)),
    )


def run(report: Report, quick: bool = False) -> None:
    size = (128 if quick else 1024) << 20
    rounds = 5
    env = _env()
    sc = _streamcrypt_argv()
    age = shutil.which("age")
    age_keygen = shutil.which("age-keygen")
    peer = age is not None and age_keygen is not None
    subprocess.run([*sc, "--version"], env=env, check=True, capture_output=True)  # caches
    if BASELINE:
        before_env = _env_for("before", env)
        subprocess.run([*sc, "--version"], env=before_env, check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        root = Path(tmp)
        plain = root / "plain"
        with open(plain, "wb") as f:
            for _ in range(size >> 20):
                f.write(os.urandom(1 << 20))
        identity = root / "id.txt"
        if peer:
            assert age_keygen is not None
            subprocess.run([age_keygen, "-o", str(identity)], check=True, capture_output=True)
            recipient = subprocess.run(
                [age_keygen, "-y", str(identity)], check=True, capture_output=True, text=True
            ).stdout.strip()
        else:
            made = subprocess.run(
                [*sc, "keygen", "--type", "age", "-o", str(identity)],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            recipient = made.stdout.strip()
        # the ciphertexts both commands decrypt: made once, by age when it is there
        maker = [age] if peer and age is not None else [*sc, "encrypt"]
        sealed = {}
        for armor in (False, True):
            sealed[armor] = root / ("sealed.asc" if armor else "sealed.age")
            flags = ["-a"] if armor else []
            subprocess.run(
                [*maker, *flags, "-r", recipient, "-o", str(sealed[armor]), str(plain)],
                env=env,
                check=True,
            )
        want = _sha256(plain)
        t = report.table(
            f"streamcrypt command against age {_age_version(age)}, {size >> 20} MiB "
            f"(seconds and GB/s, medians of {rounds} alternated runs)",
            ["command", "streamcrypt s", "GB/s", "age s", "GB/s", "age time / ours"]
            + (["before s", "before time / ours"] if BASELINE else []),
        )
        out = root / "out"
        for verb in ("encrypt", "decrypt"):
            for armor in (False, True):
                for dest in ("file", "/dev/null"):
                    target = str(out) if dest == "file" else "/dev/null"
                    flags = ["-a"] if armor else []
                    if verb == "encrypt":
                        ours = [*sc, "-r", recipient, *flags, "-o", target, str(plain)]
                        theirs = [str(age), "-r", recipient, *flags, "-o", target, str(plain)]
                    else:
                        src = str(sealed[armor])
                        ours = [*sc, "-d", "-i", str(identity), "-o", target, src]
                        theirs = [str(age), "-d", "-i", str(identity), "-o", target, src]
                    commands = {"streamcrypt": ours}
                    if peer:
                        commands["age"] = theirs
                    if BASELINE:
                        commands["before"] = ours
                    if verb == "decrypt" and dest == "file":  # both got it right
                        for name, argv in commands.items():
                            _timed(argv, _env_for(name, env))
                            if _sha256(out) != want:
                                raise RuntimeError(f"{argv[0]} decrypted to other bytes")
                    cleanup = out if dest == "file" else None
                    medians = _alternate(commands, env, rounds, cleanup)
                    what = f"{verb}{', armored' if armor else ''}, to {dest}"
                    _row(t, what, size, medians)
        t.notes += [
            "one process per run, start-up included; 'to file' is `-o FILE` on the same "
            "disk as the input: streamcrypt writes a temporary and renames it into place "
            "after a clean end (a failure never leaves a partial file; no fsync unless "
            "--fsync is given), age writes the file in place; neither fsyncs; an untimed "
            "sync before every run, so that no run pays for the writeback of the one before",
            "the decrypt rows read files age made; each decrypted file was checked "
            "against the plaintext's SHA-256 once, untimed",
            "age is a bench-only peer: `apt-get install age` (or brew, or a release from "
            "github.com/FiloSottile/age); without it these rows give streamcrypt alone",
        ]
        _startup(report, sc, age, env, 10 if quick else 30)


def _age_version(age: str | None) -> str:
    if age is None:
        return "(not installed: apt-get install age)"
    done = subprocess.run([age, "--version"], capture_output=True, text=True)
    return done.stdout.strip() or "(version unknown)"


def _startup(report: Report, sc: list[str], age: str | None, env: dict[str, str], n: int) -> None:
    t = report.table(
        f"Start-up (ms, median of {n} alternated runs; target < {STARTUP_TARGET_MS} ms)",
        ["command", "streamcrypt ms", "age ms", "python -c pass ms"],
    )
    for flag in ("--version", "--help"):
        commands = {"streamcrypt": [*sc, flag], "python": [sys.executable, "-c", "pass"]}
        if age is not None:
            commands["age"] = [age, flag]
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(n):
            for name, argv in commands.items():
                times[name].append(_timed(argv, env, check=name != "age") * 1e3)
        med = {name: statistics.median(v) for name, v in times.items()}
        t.add(
            flag,
            f"{med['streamcrypt']:.1f}",
            f"{med.get('age', float('nan')):.1f}",
            f"{med['python']:.1f}",
        )
    t.notes.append(
        "streamcrypt as installed (the console script), bytecode caches written; "
        "`python -c pass` is the interpreter's own floor on this machine"
    )
