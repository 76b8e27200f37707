"""Layer 0: renamed names keep working for one release, with a :class:`DeprecationWarning`.

The one helper every module uses when it renames a public keyword or function (see the
README's "Vocabulary"): the warning points at the caller's line and names the new name.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from .errors import InvalidParameterError

__all__ = ["renamed_keyword", "warn_renamed"]

_T = TypeVar("_T")


def renamed_keyword(
    where: str,
    old: str,
    new: str,
    old_value: _T | None,
    value: _T,
    default: _T,
    *,
    stacklevel: int = 4,
) -> _T:
    """The value of keyword ``new`` of ``where``, honouring its deprecated name ``old``.

    ``old_value`` is what the caller gave as ``old=`` (``None``: not given); given, it
    warns with :class:`DeprecationWarning` (the old name goes one release later) and is
    used, unless ``new=`` was given too (``value`` is not ``default``), which raises
    :class:`InvalidParameterError`. ``stacklevel`` 4 points the warning at the caller
    of the function that calls this (one more per helper in between).
    """
    if old_value is None:
        return value
    if value is not default and value != default:
        raise InvalidParameterError(f"{where}: give {new}= only ({old}= is its old name)")
    warn_renamed(f"{where}: {old}=", f"{new}=", stacklevel=stacklevel)
    return old_value


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (:class:`DeprecationWarning`) that ``old`` is the deprecated name of ``new``;
    the old name keeps working for one release. ``stacklevel`` 3 points at the caller of
    the function that calls this."""
    warnings.warn(
        f"{old} is deprecated, use {new} (the old name will be removed in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
