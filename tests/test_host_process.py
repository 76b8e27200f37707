"""streamcrypt leaves what it shares with the host process alone: the function prototypes
of ``ctypes.pythonapi`` are one object per process, so the engine neither changes them
nor depends on them (each check runs in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Encrypts and decrypts 1 MiB: outputs that large are filled in place through the C API.
ROUND_TRIP = """
import os
import streamcrypt
data = os.urandom(1 << 20)
assert streamcrypt.decrypt_bytes(streamcrypt.encrypt_bytes(data, bytes(32)), bytes(32)) == data
"""


def _run(*parts: str) -> None:
    """Run the parts, one after the other, in a new interpreter."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_the_engine_leaves_the_hosts_c_api_prototypes_as_they_were() -> None:
    _run(
        """
        import ctypes
        default = ctypes.pythonapi.PyBytes_FromStringAndSize
        untouched = (default.restype, default.argtypes)
        own = ctypes.pythonapi.PyBytes_AsString
        own.restype = ctypes.c_char_p
        own.argtypes = (ctypes.py_object,)
        """,
        ROUND_TRIP,
        """
        assert (default.restype, default.argtypes) == untouched
        assert (own.restype, own.argtypes) == (ctypes.c_char_p, (ctypes.py_object,))
        assert ctypes.pythonapi.PyBytes_AsString(b"hello") == b"hello"
        """,
    )


def test_the_engine_works_whatever_prototypes_the_host_sets() -> None:
    _run(
        ROUND_TRIP,
        """
        import ctypes
        ctypes.pythonapi.PyBytes_FromStringAndSize.restype = ctypes.c_void_p
        ctypes.pythonapi.PyBytes_FromStringAndSize.argtypes = (ctypes.c_char_p, ctypes.c_int)
        ctypes.pythonapi.PyBytes_AsString.restype = ctypes.c_char_p
        ctypes.pythonapi.PyBytes_AsString.argtypes = (ctypes.c_char_p,)
        """,
        ROUND_TRIP,
    )
