"""``python -m fuzz COMMAND``: the in-project fuzzers (docs/FUZZING.md).

Commands:

- ``seeds [TARGET...]``: write the seed corpora (fuzz/corpus/<target>/) from the library
  and peers; salts are random, so name only the targets whose seeds must change.
- ``smoke [TARGET...] [--inputs N] [--seed S]``: plain random mutation, deterministic
  (what ``make test`` runs through tests/test_fuzz.py).
- ``run [TARGET...] [--seconds S] [--engine atheris|mutate] [--diff]``: the long run,
  each target in its own process; ``--diff`` also asks the peers. Findings go to
  fuzz/.work/findings/, figures to fuzz/.work/stats/.
- ``linearity [TARGET...]``: the same input fed whole and in 64-byte pieces.
- ``minimize TARGET FILE``: the shortest input that keeps the finding FILE shows.
- ``report``: the figures of the last run as a Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._harness import Finding

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
WORK = HERE / ".work"


def corpus(target: str) -> list[bytes]:
    folder = CORPUS / target
    return [p.read_bytes() for p in sorted(folder.iterdir())] if folder.is_dir() else []


def _names(given: list[str]) -> list[str]:
    from .targets import TARGETS

    unknown = [n for n in given if n not in TARGETS]
    if unknown:
        raise SystemExit(f"unknown target(s) {unknown}; known: {', '.join(TARGETS)}")
    return given or list(TARGETS)


def cmd_seeds(args: argparse.Namespace) -> int:
    from ._seeds import make_seeds

    wanted = set(_names(args.targets))
    for target, seeds in make_seeds().items():
        if target not in wanted:
            continue
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for data in seeds:
            (folder / hashlib.sha1(data).hexdigest()[:12]).write_bytes(data)
        print(f"{target:20} {len(seeds):3} seeds")
    return 0


class Session:
    """One target's run: counts, findings (deduplicated), differential disagreements."""

    def __init__(self, target: str, diff: bool) -> None:
        from .targets import TARGETS

        self.target = TARGETS[target]
        self.diff = diff and self.target.peer is not None
        self.inputs = 0
        self.start = time.monotonic()
        self.findings: dict[tuple[str, str, str], Finding] = {}
        self.disagreements: dict[str, tuple[bytes, bool]] = {}
        self.explained: dict[str, int] = {}

    def one(self, data: bytes) -> None:
        from . import _peers
        from ._harness import check

        self.inputs += 1
        data = data[: self.target.max_len]
        for finding in check(self.target, data):
            known = self.findings.get(finding.key())
            if known is None or len(finding.data) < len(known.data):
                self.findings[finding.key()] = finding
        if self.diff and self.target.peer is not None:
            ours = self._accepts(data)
            if ours is None or ours == self.target.peer(data):
                return
            reason = _peers.deliberate(self.target.name, data, ours)
            if reason is not None:
                self.explained[reason.id] = self.explained.get(reason.id, 0) + 1
                return
            label = (
                f"we {'accept' if ours else 'refuse'}, the peer {'refuses' if ours else 'accepts'}"
            )
            known_input = self.disagreements.get(label)
            if known_input is None or len(data) < len(known_input[0]):
                self.disagreements[label] = (data, ours)

    def _accepts(self, data: bytes) -> bool | None:
        from ._harness import verdict

        try:
            result, _ = verdict(self.target, [data])
        except Exception:
            return None
        return result[0] == "ok"

    def new_findings(self) -> list[Finding]:
        """The findings no KNOWN_OPEN entry explains."""
        from ._harness import known_open

        return [f for f in self.findings.values() if known_open(f) is None]

    def stats(self) -> dict[str, object]:
        from ._harness import known_open

        seconds = time.monotonic() - self.start
        findings = []
        for f in self.findings.values():
            issue = known_open(f)
            findings.append(
                {
                    "kind": f.kind,
                    "detail": f.detail,
                    "input": f.data[:4096].hex() + ("..." if len(f.data) > 4096 else ""),
                    "known_open": issue.issue if issue else None,
                }
            )
        return {
            "target": self.target.name,
            "inputs": self.inputs,
            "seconds": round(seconds, 1),
            "per_second": round(self.inputs / seconds, 1) if seconds else 0,
            "findings": findings,
            "disagreements": [
                {"what": label, "input": data.hex()}
                for label, (data, _) in self.disagreements.items()
            ],
            "explained": self.explained,
        }

    def save(self, engine: str) -> None:
        (WORK / "stats").mkdir(parents=True, exist_ok=True)
        stats = dict(self.stats(), engine=engine, diff=self.diff)
        path = WORK / "stats" / f"{self.target.name}.json"
        path.write_text(json.dumps(stats, indent=1))
        findings = WORK / "findings" / self.target.name
        for f in self.findings.values():
            findings.mkdir(parents=True, exist_ok=True)
            (findings / f"{f.kind}-{hashlib.sha1(f.data).hexdigest()[:12]}").write_bytes(f.data)


def mutation_loop(
    session: Session, seeds: list[bytes], rng: random.Random, *, inputs: int, seconds: float
) -> None:
    """Plain random mutation: seeds first, then mutants of seeds and of earlier mutants."""
    from ._harness import mutate
    from ._seeds import DICTIONARY

    tokens = DICTIONARY.get(session.target.name, [])
    pool = list(seeds) or [b""]
    for data in pool:
        session.one(data)
    deadline = time.monotonic() + seconds
    while session.inputs < inputs and time.monotonic() < deadline:
        parent = rng.choice(pool)
        child = mutate(parent, rng, tokens)
        session.one(child)
        if rng.random() < 0.1 and len(pool) < 2000:
            pool.append(child)


def cmd_smoke(args: argparse.Namespace) -> int:
    status = 0
    for name in _names(args.targets):
        session = Session(name, diff=args.diff)
        mutation_loop(
            session,
            corpus(name),
            random.Random(args.seed),
            inputs=args.inputs,
            seconds=args.seconds,
        )
        print(json.dumps(session.stats()))
        if session.new_findings() or session.disagreements:
            status = 1
    return status


def cmd_worker(args: argparse.Namespace) -> int:
    """One target in this process (``run`` starts one per target)."""
    seeds = corpus(args.target)
    if args.engine == "atheris":
        from ._atheris import fuzz

        fuzz(args.target, args.diff, seeds, args.seconds)  # does not return
    session = Session(args.target, diff=args.diff)
    mutation_loop(session, seeds, random.Random(args.seed), inputs=1 << 62, seconds=args.seconds)
    session.save("mutate")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    if args.engine == "atheris" and importlib.util.find_spec("atheris") is None:
        print("atheris is not installed: using --engine mutate (docs/FUZZING.md)", flush=True)
        args.engine = "mutate"
    for name in _names(args.targets):
        argv = [sys.executable, "-m", "fuzz", "_worker", name, "--seconds", str(args.seconds)]
        argv += ["--engine", args.engine, "--seed", str(args.seed)] + (
            ["--diff"] if args.diff else []
        )
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        tail = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
        print(
            f"{name:20} {time.monotonic() - started:6.1f} s  exit {proc.returncode} {' '.join(tail)}",
            flush=True,
        )
    return cmd_report(args)


def cmd_report(args: argparse.Namespace) -> int:
    rows = []
    for path in sorted((WORK / "stats").glob("*.json")):
        s = json.loads(path.read_text())
        found = [f for f in s["findings"] if not f["known_open"]]
        known = [f for f in s["findings"] if f["known_open"]]
        rows.append(
            f"| {s['target']} | {s['engine']} | {s['seconds']:.0f} | {s['inputs']:,} | "
            f"{s['per_second']:,.0f} | {len(found)} | {len(known)} | "
            f"{len(s['disagreements']) if s['diff'] else '-'} |"
        )
    print(
        "| target | engine | s | inputs | inputs/s | findings | known open | peer disagreements |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    return 0


def cmd_linearity(args: argparse.Namespace) -> int:
    from ._harness import known_open, linearity
    from .targets import TARGETS

    status = 0
    for name in _names(args.targets):
        target = TARGETS[name]
        if not target.chunked:
            continue
        for data in target.stress():
            finding = linearity(target, data, 64)
            if finding is None and len(data) <= 256 << 10:
                finding = linearity(target, data, 1)
            if finding is not None:
                note = known_open(finding)
                print(
                    f"{name}: {finding.detail}" + (f" [known open: {note.issue}]" if note else "")
                )
                status |= note is None
    return int(status)


def cmd_minimize(args: argparse.Namespace) -> int:
    from ._harness import check, minimize
    from .targets import TARGETS

    target = TARGETS[args.target]
    data = Path(args.file).read_bytes()
    first = check(target, data)
    if not first:
        print("no finding on this input")
        return 1
    kind = first[0].key()
    small = minimize(data, lambda d: any(f.key() == kind for f in check(target, d)))
    print(f"{first[0].kind}: {first[0].detail}")
    print(f"{len(data)} -> {len(small)} bytes: {small!r}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz")
    sub = parser.add_subparsers(dest="command", required=True)
    seeds = sub.add_parser("seeds")
    seeds.add_argument("targets", nargs="*")
    seeds.set_defaults(run=cmd_seeds)
    smoke = sub.add_parser("smoke")
    smoke.add_argument("targets", nargs="*")
    smoke.add_argument("--inputs", type=int, default=400)
    smoke.add_argument("--seconds", type=float, default=5.0)
    smoke.add_argument("--seed", type=int, default=14)
    smoke.add_argument("--diff", action="store_true")
    smoke.set_defaults(run=cmd_smoke)
    run = sub.add_parser("run")
    run.add_argument("targets", nargs="*")
    run.add_argument("--seconds", type=float, default=60.0)
    run.add_argument("--engine", choices=("atheris", "mutate"), default="atheris")
    run.add_argument("--seed", type=int, default=14)
    run.add_argument("--diff", action="store_true")
    run.set_defaults(run=cmd_run)
    worker = sub.add_parser("_worker")
    worker.add_argument("target")
    worker.add_argument("--seconds", type=float, default=60.0)
    worker.add_argument("--engine", choices=("atheris", "mutate"), default="atheris")
    worker.add_argument("--seed", type=int, default=14)
    worker.add_argument("--diff", action="store_true")
    worker.set_defaults(run=cmd_worker)
    sub.add_parser("report").set_defaults(run=cmd_report)
    lin = sub.add_parser("linearity")
    lin.add_argument("targets", nargs="*")
    lin.set_defaults(run=cmd_linearity)
    mini = sub.add_parser("minimize")
    mini.add_argument("target")
    mini.add_argument("file")
    mini.set_defaults(run=cmd_minimize)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
