"""GF(2^128) doubling (XTS, EME): right, branch-free, and written once."""

from __future__ import annotations

import dis
import io
import itertools
import random
import tokenize
from pathlib import Path

import streamcrypt
from streamcrypt.primitives._gf128 import double, doublings

ROOT = Path(streamcrypt.__file__).parent


def _reference(x: int) -> int:
    """Textbook doubling (branches on the top bit: fine for a test)."""
    x <<= 1
    if x >> 128:
        x = (x ^ (1 << 128)) ^ 0x87
    return x


def test_double_matches_the_textbook_form() -> None:
    rng = random.Random(128)
    values = [0, 1, 1 << 127, (1 << 128) - 1, (1 << 127) - 1, 0x87 << 120]
    values += [rng.getrandbits(128) for _ in range(2000)]
    for x in values:
        assert double(x) == _reference(x)
    chain = doublings(values[-1], 130)
    assert len(chain) == 130 and chain[0] == values[-1]
    assert all(_reference(a) == b for a, b in itertools.pairwise(chain))


def test_double_has_no_branch_on_its_argument() -> None:
    """Key-derived masks pass through double(): a jump in it would be a timing leak."""
    jumps = [i.opname for i in dis.get_instructions(double) if "JUMP" in i.opname]
    assert not jumps


def test_the_library_has_one_gf128_reduction() -> None:
    """A second doubling (x^7 + x^2 + x + 1 written again) would escape the checks above."""
    found = [
        f"{p.relative_to(ROOT)}:{tok.start[0]}"
        for p in ROOT.rglob("*.py")
        if p.name != "_gf128.py"
        for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
        if tok.type == tokenize.NUMBER and tok.string.lower() in ("0x87", "135", "0b10000111")
    ]
    assert not found
