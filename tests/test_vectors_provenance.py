"""The vendored vectors are the upstream bytes: every file in tests/vectors is listed in
SHA256SUMS with its hash, and nothing is listed that is not there.

``python tests/test_vectors_provenance.py`` rewrites SHA256SUMS after a deliberate refresh
(see tests/vectors/README.md).
"""

from __future__ import annotations

import hashlib

from support import VECTORS

SUMS = VECTORS / "SHA256SUMS"
#: Files of our own in the folder, not upstream data.
OURS = {"README.md", "SHA256SUMS"}


def _current() -> dict[str, str]:
    files = (p for p in VECTORS.rglob("*") if p.is_file())
    return {
        p.relative_to(VECTORS).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in files
        if p.relative_to(VECTORS).as_posix() not in OURS
    }


def _listed() -> dict[str, str]:
    pairs = (line.split("  ", 1) for line in SUMS.read_text().splitlines() if line)
    return {name: digest for digest, name in pairs}


def test_vendored_vectors_match_their_sums() -> None:
    current, listed = _current(), _listed()
    assert sorted(current) == sorted(listed), "files added or removed: update SHA256SUMS"
    changed = [name for name, digest in listed.items() if current[name] != digest]
    assert not changed, f"vendored vectors differ from their upstream bytes: {changed}"
    assert sum(name.startswith("age-testkit/") for name in listed) == 143


def _rewrite() -> None:
    lines = [f"{digest}  {name}\n" for name, digest in sorted(_current().items())]
    SUMS.write_text("".join(lines))
    print(f"wrote {len(lines)} sums to {SUMS}")


if __name__ == "__main__":
    _rewrite()
