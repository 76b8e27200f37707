"""JSON from outside, read with typed errors: the one loader every JSON reader uses.

``json.loads`` on hostile text can raise more than ``ValueError``: nesting a few thousand
brackets deep raises ``RecursionError`` (where exactly depends on how deep the caller's
own stack already is), and a repeated member silently keeps the last value, so two
readers of the same text may disagree. :func:`load_json` turns every one of these into a
:class:`FormatError` and refuses repeated members.
"""

from __future__ import annotations

import json
from typing import Any

from ..abc import Buffer
from ..errors import FormatError


class _DuplicateMember(Exception):
    """A JSON object names the same member twice (turned into FormatError below)."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _DuplicateMember(name)
        out[name] = value
    return out


def load_json(text: str | Buffer, what: str, *, max_size: int | None = None) -> Any:
    """Parse ``text`` (a ``str``, or bytes in UTF-8/16/32 as ``json.loads`` detects them).

    Raises :class:`FormatError` naming ``what`` for text that is not JSON, nests too
    deeply, is not in a Unicode encoding, repeats a member of an object, or is longer
    than ``max_size`` (characters or bytes).
    """
    raw = text if isinstance(text, str) else bytes(text)
    if max_size is not None and len(raw) > max_size:
        raise FormatError(f"{what} is larger than {max_size} bytes")
    try:
        return json.loads(raw, object_pairs_hook=_unique_members)
    except _DuplicateMember as exc:
        raise FormatError(
            f"{what} names the member {exc.args[0][:40]!r} twice in one object"
        ) from None
    except RecursionError:
        raise FormatError(f"{what} nests arrays or objects too deeply") from None
    except (ValueError, UnicodeError):
        raise FormatError(f"{what} is not valid JSON") from None
