"""The fuzz smoke: every target, a fixed number of mutated inputs from a fixed seed.

Plain random mutation (fuzz/_harness.py), so it runs anywhere atheris does not; the long
coverage-guided run is ``make fuzz`` (docs/FUZZING.md). Each target must show no
untyped exception, no call over a second, no chunking disagreement and, where a peer
exists, no disagreement with it that docs/FUZZING.md does not list. Known-open findings
(someone else's issue) are expected failures, strict: the fix turns them into errors
until their KNOWN_OPEN entry is removed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from fuzz import _peers
from fuzz.__main__ import Session, corpus, mutation_loop
from fuzz._harness import KNOWN_OPEN, Finding, check, known_open, linearity, verdict
from fuzz.targets import TARGETS

DOCS = Path(__file__).resolve().parent.parent / "docs" / "FUZZING.md"
SMOKE_INPUTS = 600


@pytest.mark.parametrize("name", list(TARGETS))
def test_smoke(name: str) -> None:
    session = Session(name, diff=True)
    mutation_loop(session, corpus(name), random.Random(14), inputs=SMOKE_INPUTS, seconds=60)
    assert session.inputs >= SMOKE_INPUTS
    new = session.new_findings()
    assert not new, [(f.kind, f.detail, f.data[:200]) for f in new]
    assert not session.disagreements, {
        what: data[:300].hex() for what, (data, _) in session.disagreements.items()
    }


@pytest.mark.parametrize("name", list(TARGETS))
def test_seeds_pass_and_the_peer_agrees(name: str) -> None:
    """The corpus matches the fixed keys: every seed decodes, some seed is accepted (a
    corpus refused whole, stale after a format change, fuzzes nothing past the first
    check), and the peer agrees."""
    target = TARGETS[name]
    seeds = corpus(name)
    assert seeds, f"no seeds for {name}: run python -m fuzz seeds"
    accepted = [data for data in seeds if verdict(target, [data])[0][0] == "ok"]
    assert accepted, f"every seed of {name} is refused: run python -m fuzz seeds {name}"
    for data in seeds:
        assert check(target, data) == []
        if target.peer is not None and not target.peer(data):
            assert _peers.deliberate(name, data, True) is not None, data[:100]


LINEAR = [
    n
    for n, t in TARGETS.items()
    if t.chunked
    and t.stress()
    and n not in {issue.target for issue in KNOWN_OPEN if issue.kind == "quadratic"}
]


@pytest.mark.parametrize("name", LINEAR)
def test_linear_in_the_bytes_received(name: str) -> None:
    target = TARGETS[name]
    for data in target.stress():
        assert linearity(target, data, 64) is None


# ------------------------------------------------------- fixed chunking findings


#: Armor without its END line around an age header no identity opens (minimised).
_BROKEN_ARMOR = (
    b"-----BEGIN AGE ENCRYPTED FILE-----\n"
    b"YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB4aEJvWkhCeGlNd2RZMUVk\n"
    b"b3BJRUlNd2NBVmRmczdveWNoRFB3anh2TkhnClhMVzVyenQyN1dKRktRcDVjdjU3\n"
    b"andrV0RsUXVucUQ2amZPQ0htbUFpM2cKLS0tIGxBcERuZGNld0JQN3BaM09pQWFB\n"
    b"cmNtUUVBS3hRRHozOGIrTlB4SmlaZDgK3aP76h6tS/eKQPwqEbyLEn4ziRaHuBkq\n"
)


def _one_byte_pieces(target: str, data: bytes) -> Finding | None:
    whole, _ = verdict(TARGETS[target], [data])
    split, _ = verdict(TARGETS[target], [data[i : i + 1] for i in range(len(data))])
    return None if whole == split else Finding(target, "chunking", f"{whole} vs {split}", data)


#: One reproducer per KNOWN_OPEN entry, in the same order.
REPRODUCERS: list[Callable[[], Finding | None]] = []


@pytest.mark.parametrize(
    "reproduce",
    [
        pytest.param(
            lambda: _one_byte_pieces("age-armored", b" " * 12 + corpus("age-armored")[0]),
            id="age-armored-leading-whitespace",
        ),
        pytest.param(lambda: _one_byte_pieces("age-armored", _BROKEN_ARMOR), id="broken-armor"),
    ],
)
def test_fixed_chunking_findings_stay_fixed(reproduce: Callable[[], Finding | None]) -> None:
    """Issue 14 finding 4 (once KNOWN_OPEN entries): one verdict whole and byte by byte."""
    finding = reproduce()
    assert finding is None, finding.detail


def test_every_known_open_finding_has_its_reproducer() -> None:
    assert len(REPRODUCERS) == len(KNOWN_OPEN)
    for issue, reproduce in zip(KNOWN_OPEN, REPRODUCERS, strict=True):
        finding = reproduce()
        if finding is not None:  # still open: the entry must explain it
            assert known_open(finding) is issue, (issue, finding.detail)


# ---------------------------------------------------------------------------- the docs


def _table_ids(section: str) -> set[str]:
    text = DOCS.read_text()
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", body, re.MULTILINE))


def test_deliberate_differences_are_the_documented_ones() -> None:
    assert _table_ids("Deliberate differences from the peers") == {d.id for d in _peers.DIFFERENCES}


def test_known_open_findings_are_documented() -> None:
    text = DOCS.read_text()
    for issue in KNOWN_OPEN:
        assert f"`{issue.target}` | {issue.kind}" in text, issue


def test_the_memory_check_sees_what_one_input_costs_and_nothing_before_it() -> None:
    """A decoder that touches 600 MiB for one input is a memory finding; the same check
    right after it, on a decoder that allocates nothing, is clean (the peak of the work
    before does not count)."""
    from fuzz._harness import MEMORY_LIMIT, Target

    def hungry(pieces: Sequence[bytes]) -> bytes:
        block = bytearray(MEMORY_LIMIT + (88 << 20))
        block[::4096] = b"\x01" * len(block[::4096])  # touch every page
        return bytes(block[:1])

    def frugal(pieces: Sequence[bytes]) -> bytes:
        return b"".join(pieces)

    found = check(Target("hungry", hungry, chunked=False), b"x")
    # Touching 700 MiB may also take over the soft time limit on a loaded machine; the
    # memory finding is what this test is about.
    assert "memory" in [f.kind for f in found]
    assert check(Target("frugal", frugal, chunked=False), b"x") == []
