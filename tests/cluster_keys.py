"""A key callable for the cluster tests, importable on the workers (PYTHONPATH=tests)."""

from __future__ import annotations

import os

from streamcrypt.keys import SecretKey


def key_b() -> SecretKey:
    return SecretKey(bytes.fromhex(os.environ["SC_TEST_KEY_B"]), key_id="b")
