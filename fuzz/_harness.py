"""The shared fuzz harness: one input through one target, and everything checked on it.

A :class:`Target` is a decoder or key parser wrapped in a few lines (fuzz/targets.py):
``decode(pieces)`` consumes the input as a list of byte strings and returns what the
decoder released. :func:`check` runs one input and reports :class:`Finding` objects:

- ``untyped``: an exception escaped that is not one of the target's typed errors
  (``streamcrypt.errors`` for the library, ``KeyFileError`` for the CLI's key files);
- ``slow``: a call took longer than :data:`SOFT_LIMIT` twice in a row, or was stopped
  after :data:`HARD_LIMIT` seconds of CPU (a SIGPROF timer; code in C runs to its end
  first; libFuzzer's ``-timeout`` also stops a hang under atheris);
- ``memory``: the process's peak resident memory grew past the harness's limit;
- ``chunking``: the input fed whole and the same input fed in random pieces (cut by a
  generator seeded from the input, so a finding reproduces) got different verdicts.

A verdict is ``("ok", sha256 of the output)`` or ``("error", family)``: the family is the
error class just below ``StreamCryptError`` (FormatError, AuthenticationError,
TruncatedStreamError, ...), so a chunking finding is a different accept/reject answer, a
different output, or a different kind of failure.
:func:`linearity` is a separate probe (kind ``quadratic``): fed in small pieces, four
times the bytes must cost about four times as much (header parsing must be linear in
the bytes received, whatever the chunking).

Known-open findings (issues someone else fixes) are listed in :data:`KNOWN_OPEN`; the
smoke test and the reports set them apart instead of failing on them.
"""

from __future__ import annotations

import hashlib
import random
import resource
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streamcrypt.errors import StreamCryptError

__all__ = [
    "HARD_LIMIT",
    "KNOWN_OPEN",
    "SOFT_LIMIT",
    "Finding",
    "Target",
    "check",
    "cut",
    "known_open",
    "linearity",
    "minimize",
    "mutate",
    "verdict",
]

#: A call slower than this (twice) is a finding: "no call over 1 s" (issue 14).
SOFT_LIMIT = 1.0
#: A call is stopped after this many seconds.
HARD_LIMIT = 10.0
#: Peak RSS growth over the harness's start that counts as a memory finding. The targets
#: lower the password-KDF caps (see targets.py), so no legitimate input comes near it.
MEMORY_LIMIT = 512 << 20

Verdict = tuple[str, str]


@dataclass(frozen=True)
class Target:
    """One decoder or parser under the harness."""

    name: str
    #: Consumes the input (one piece, or the same bytes cut in several) and returns the
    #: bytes it released; raises on a refusal.
    decode: Callable[[Sequence[bytes]], bytes]
    #: Whether feeding the input in pieces is meaningful (streaming decoders).
    chunked: bool = True
    #: The exception types a refusal may take.
    typed: tuple[type[BaseException], ...] = (StreamCryptError,)
    #: The peer's verdict for the differential mode: True if it accepts the input.
    peer: Callable[[bytes], bool] | None = None
    #: Inputs longer than this are cut to it (libFuzzer's -max_len is set to it too).
    max_len: int = 1 << 17
    #: Large inputs for the linearity probe (made on demand).
    stress: Callable[[], list[bytes]] = field(default=lambda: [])


class Finding(NamedTuple):
    target: str
    kind: str
    detail: str
    data: bytes

    def key(self) -> tuple[str, str, str]:
        """What makes two findings the same bug (the input aside)."""
        return self.target, self.kind, self.detail.split(":")[0]


class _Timeout(BaseException):
    """Raised by the SIGPROF handler inside a call that ran past HARD_LIMIT."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`_Timeout` in a call that used ``seconds`` of CPU time.

    A CPU-time timer (SIGPROF) leaves SIGALRM to its owners: pytest-timeout and
    libFuzzer's ``-timeout`` both use it. A decoder that hangs burns CPU.
    """
    previous = signal.signal(signal.SIGPROF, _on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def verdict(target: Target, pieces: Sequence[bytes]) -> tuple[Verdict, float]:
    """Run the target once; (verdict, seconds). Untyped exceptions propagate."""
    start = time.perf_counter()
    try:
        out = target.decode(pieces)
        result = ("ok", hashlib.sha256(out).hexdigest()[:16])
    except target.typed as exc:
        result = ("error", _family(type(exc)).__name__)
    return result, time.perf_counter() - start


def _family(cls: type[BaseException]) -> type[BaseException]:
    """The error's family: the class just below ``StreamCryptError`` it derives from.

    Chunking may change which of two faults a pipeline meets first (armor that breaks
    after an unsupported age version line is an UnsupportedFormatError in pieces and a
    FormatError whole: both malformed input), never the kind of failure.
    """
    for base in reversed(cls.__mro__):
        if issubclass(base, StreamCryptError) and base is not StreamCryptError:
            return base
    return cls


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` in random pieces: mostly small (1..64 bytes), some empty, some large."""
    pieces: list[bytes] = []
    pos = 0
    while pos < len(data):
        shape = rng.random()
        n = 0 if shape < 0.05 else rng.randint(1, 64) if shape < 0.8 else rng.randint(1, 9000)
        pieces.append(data[pos : pos + n])
        pos += n
    return pieces or [b""]


def _status(field: str) -> int | None:
    """A byte figure of /proc/self/status (Linux), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _peak_rss() -> int:
    peak = _status("VmHWM:")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_BASE_RSS = _peak_rss()


def _reset_peak() -> int:
    """Start one check's memory measurement; its baseline.

    On Linux the process's peak RSS is reset (``clear_refs`` 5) and the baseline is the
    current RSS, so what earlier work in the same process peaked at (other tests of a
    pytest run) does not count. Elsewhere the baseline is the peak at import.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return _BASE_RSS
    current = _status("VmRSS:")
    return current if current is not None else _BASE_RSS


def _run(
    target: Target, pieces: Sequence[bytes], data: bytes
) -> tuple[Verdict | None, Finding | None]:
    """One timed run: (verdict, None) or (None, finding)."""
    try:
        with _deadline(HARD_LIMIT):
            result, seconds = verdict(target, pieces)
    except _Timeout:
        return None, Finding(target.name, "slow", f"stopped after {HARD_LIMIT:.0f} s", data)
    except RecursionError as exc:
        return None, Finding(target.name, "untyped", f"RecursionError: {exc}"[:200], data)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"[:200]
        return None, Finding(target.name, "untyped", detail, data)
    if seconds > SOFT_LIMIT:
        with _deadline(HARD_LIMIT):
            _, again = verdict(target, pieces)
        if again > SOFT_LIMIT:
            return None, Finding(target.name, "slow", f"slow: {min(seconds, again):.2f} s", data)
    return result, None


def check(target: Target, data: bytes) -> list[Finding]:
    """Every check on one input; the findings (empty if none)."""
    data = data[: target.max_len]
    base = _reset_peak()
    whole, finding = _run(target, [data], data)
    findings = [finding] if finding else []
    if whole is not None and target.chunked and len(data) > 1:
        rng = random.Random(hashlib.sha256(data).digest())
        pieces = cut(data, rng)
        split, finding = _run(target, pieces, data)
        if finding:
            findings.append(finding)
        elif split != whole:
            detail = f"verdict: whole {whole[0]} {whole[1]}, in {len(pieces)} pieces {split}"
            findings.append(Finding(target.name, "chunking", detail, data))
    if _peak_rss() - base > MEMORY_LIMIT:
        grown = (_peak_rss() - base) >> 20
        findings.append(Finding(target.name, "memory", f"memory: peak grew {grown} MiB", data))
    return findings


def _best_time(target: Target, data: bytes, piece: int) -> float:
    pieces = [data[i : i + piece] for i in range(0, len(data), piece)] or [b""]
    best = HARD_LIMIT
    for _ in range(2):
        try:
            with _deadline(HARD_LIMIT):
                best = min(best, verdict(target, pieces)[1])
        except _Timeout:
            pass
    return best


def linearity(target: Target, data: bytes, piece: int = 64) -> Finding | None:
    """A finding if ``data`` fed in ``piece``-byte pieces grows faster than its length.

    Feeding four times the bytes must cost about four times as much; a quadratic parser
    costs sixteen. The probe times the first quarter of ``data`` and all of it (best of
    two each) and reports a ratio above six, unless the whole run took under 0.2 s.
    """
    quarter = _best_time(target, data[: len(data) // 4], piece)
    full = _best_time(target, data, piece)
    if full > 6 * quarter and full > 0.2:
        detail = (
            f"quadratic: {len(data)} bytes in {piece}-byte pieces {full:.2f} s, "
            f"a quarter of them {quarter:.3f} s"
        )
        return Finding(target.name, "quadratic", detail, data)
    return None


# ------------------------------------------------------------------------------- mutation

_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF_FFFF, 0xFFFF_FFFF, 1 << 31, 1 << 32, 65535, 65536]


def mutate(data: bytes, rng: random.Random, dictionary: Sequence[bytes] = ()) -> bytes:
    """A few random edits of ``data``: byte flips, inserts, deletes, copies, interesting
    integers, dictionary tokens and truncation. Plain random mutation, no coverage."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
        op = rng.randrange(9)
        pos = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(pos, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[min(pos, len(out) - 1)] = rng.randrange(256)
        elif op == 2:
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3 and out:
            del out[pos : pos + rng.randint(1, 16)]
        elif op == 4 and out:
            start = rng.randrange(len(out))
            out[pos:pos] = out[start : start + rng.randint(1, 64)]
        elif op == 5:
            value = rng.choice(_INTERESTING)
            size = rng.choice((1, 2, 4, 8))
            word = (value & ((1 << (8 * size)) - 1)).to_bytes(size, rng.choice(("big", "little")))
            out[pos : pos + size] = word
        elif op == 6 and dictionary:
            token = rng.choice(dictionary)
            out[pos : pos + (len(token) if rng.random() < 0.5 else 0)] = token
        elif op == 7 and out:
            del out[rng.randrange(len(out)) :]
        elif op == 8 and out:
            start = rng.randrange(len(out))
            out[pos:pos] = out[start : start + 1] * rng.randint(2, 300)
    return bytes(out)


def minimize(data: bytes, still_fails: Callable[[bytes], bool]) -> bytes:
    """The shortest input found by deleting chunks that keeps ``still_fails`` true."""
    best = data
    step = max(1, len(best) // 2)
    while step >= 1:
        i = 0
        changed = False
        while i < len(best):
            candidate = best[:i] + best[i + step :]
            if candidate != best and still_fails(candidate):
                best, changed = candidate, True
            else:
                i += step
        if not changed:
            step //= 2
    return best


# ---------------------------------------------------------------------- known-open issues


@dataclass(frozen=True)
class KnownIssue:
    """A finding someone else is fixing: the lead removes the entry with the fix."""

    target: str
    kind: str
    issue: str
    #: Recognises the findings the issue explains (all of this target and kind if it
    #: does not narrow them down).
    applies: Callable[[Finding], bool] = field(default=lambda finding: True)


#: Findings someone else is fixing (none open now: issue 14's were fixed with their tests).
KNOWN_OPEN: tuple[KnownIssue, ...] = ()


def known_open(finding: Finding) -> KnownIssue | None:
    for issue in KNOWN_OPEN:
        if (issue.target, issue.kind) == (finding.target, finding.kind) and issue.applies(finding):
            return issue
    return None
