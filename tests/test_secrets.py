"""Secrets stay secret: no Python arithmetic on them, and none in a repr, pickle or log.

- Secret-dependent arithmetic runs in constant-time native code: while an operation on a
  secret runs, no streamcrypt frame turns bytes into a Python integer (``int.from_bytes``,
  ``pow``) and none loops in Python (a ladder over the scalar's bits would).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import streamcrypt
from streamcrypt.primitives import (
    EdDsaBlake2bPrivateKey,
    eddsa_to_x25519_private,
    elligator_key_pair,
    elligator_rev,
    x25519_dirty_fast,
    x25519_dirty_small,
    x25519_inverse,
)

ROOT = str(Path(streamcrypt.__file__).parent)
SECRET = bytes(range(7, 39))
CURVE_POINT = (9).to_bytes(32, "little")  # the base point
TWIST_POINT = (2).to_bytes(32, "little")  # 2^3 + A 2^2 + 2 is not a square: on the twist

#: Every operation on a secret scalar, key or seed of the curve code.
SECRET_OPERATIONS: dict[str, Callable[[], object]] = {
    "x25519_dirty_fast": lambda: x25519_dirty_fast(SECRET),
    "x25519_dirty_small": lambda: x25519_dirty_small(SECRET),
    "x25519_inverse (curve)": lambda: x25519_inverse(SECRET, CURVE_POINT),
    "x25519_inverse (twist)": lambda: x25519_inverse(SECRET, TWIST_POINT),
    "elligator_key_pair": lambda: elligator_key_pair(SECRET),
    "elligator_rev (of a secret's key)": lambda: elligator_rev(x25519_dirty_fast(SECRET), 1),
    "eddsa_to_x25519_private": lambda: eddsa_to_x25519_private(SECRET),
    "EdDsaBlake2bPrivateKey": lambda: EdDsaBlake2bPrivateKey(SECRET),
    "EdDsaBlake2bPrivateKey.sign": lambda: EdDsaBlake2bPrivateKey(SECRET).sign(b"message"),
    "EdDsaBlake2bPrivateKey.sign_chunks": lambda: EdDsaBlake2bPrivateKey(SECRET).sign_chunks(
        lambda: [b"mess", b"age"]
    ),
}

#: Builtins that make or compute with Python integers from bytes.
INTEGER_MAKERS = {"from_bytes", "pow"}
#: More Python lines than argument checks and a few native calls take: a loop.
LINE_BUDGET = 150


def _trace(operation: Callable[[], object]) -> tuple[list[str], int]:
    """(integer-making builtins called from streamcrypt frames, streamcrypt lines run)."""
    calls: list[str] = []
    lines = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and frame.f_code.co_filename.startswith(ROOT):
            if getattr(arg, "__name__", "") in INTEGER_MAKERS:
                calls.append(f"{arg.__name__} in {frame.f_code.co_qualname}")

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if not frame.f_code.co_filename.startswith(ROOT):
            return None
        if event == "line":
            lines += 1
        return trace

    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        operation()
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    return calls, lines


@pytest.mark.parametrize("name", sorted(SECRET_OPERATIONS))
def test_secret_curve_arithmetic_runs_in_native_code(name: str) -> None:
    operation = SECRET_OPERATIONS[name]
    operation()  # warm up: imports and caches are not the operation
    calls, lines = _trace(operation)
    assert not calls, f"{name} turns a secret into a Python integer: {calls}"
    assert lines < LINE_BUDGET, f"{name} runs {lines} Python lines: a loop over secret data?"
