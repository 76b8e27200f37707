"""A software stand-in for ``streamcrypt.keys.Pkcs11Key`` (the same three names), for the
age plugin's tests: AES key wrap with padding (RFC 5649) under a key derived from the
URI's ``object=`` attribute. A URI with ``id=pin`` asks for the PIN ``1234`` (through
the ``pin`` callback, which the plugin answers with ``request-secret``).

``python tests/soft_pkcs11.py DIR`` writes ``DIR/age-plugin-pkcs11``: the plugin's main
with this key, for PATH.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Callable

from cryptography.hazmat.primitives.keywrap import (
    InvalidUnwrap,
    aes_key_unwrap_with_padding,
    aes_key_wrap_with_padding,
)

from streamcrypt.errors import AuthenticationError

PIN = "1234"


class SoftKey:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_uri(cls, uri: str, *, pin: Callable[[], str] | None = None) -> SoftKey:
        attrs = dict(part.split("=", 1) for part in uri[len("pkcs11:") :].split(";") if "=" in part)
        if attrs.get("id") == "pin" and (pin is None or pin() != PIN):
            raise AuthenticationError("the token refused the PIN")
        return cls(hashlib.sha256(b"soft token " + attrs.get("object", "").encode()).digest())

    def wrap(self, data: bytes) -> bytes:
        return aes_key_wrap_with_padding(self._key, data)

    def unwrap(self, wrapped: bytes) -> bytes:
        try:
            return aes_key_unwrap_with_padding(self._key, wrapped)
        except InvalidUnwrap:
            raise AuthenticationError("the wrapped key did not unwrap") from None


def write_plugin(directory: str, name: str = "age-plugin-pkcs11") -> str:
    """An ``age-plugin-pkcs11`` script in ``directory`` running the plugin with SoftKey."""
    path = os.path.join(directory, name)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(path, "w") as f:
        f.write(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path[:0] = [{here!r}, {os.path.dirname(here)!r}]\n"
            "from soft_pkcs11 import SoftKey\n"
            "from streamcrypt.cli._age_plugin_pkcs11 import main\n"
            "sys.exit(main(key_for=SoftKey.from_uri))\n"
        )
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


if __name__ == "__main__":
    write_plugin(sys.argv[1])
