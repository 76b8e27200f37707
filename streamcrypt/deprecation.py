"""Layer 0: renamed names keep working for one release, with a :class:`DeprecationWarning`.

The helpers every module uses when it renames a public keyword or function (see the
README's "Vocabulary") or makes parameters keyword-only (:func:`keyword_only`): the
warning points at the caller's line and names what to write instead.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .errors import InvalidParameterError

__all__ = ["keyword_only", "renamed_keyword", "warn_renamed"]

_T = TypeVar("_T")
_P = ParamSpec("_P")


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


def keyword_only(*names: str) -> Callable[[Callable[_P, _T]], Callable[_P, _T]]:
    """Decorate a function whose parameters ``names`` became keyword-only: for one release
    they may still come by position, after the function's positional parameters, in that
    order, with a :class:`DeprecationWarning` pointing at the caller's line.

    A name given both ways, or more positional arguments than there are names, raises
    :class:`TypeError` as Python does.
    """

    def decorate(fn: Callable[_P, _T]) -> Callable[_P, _T]:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        fixed = sum(p.kind in kinds for p in inspect.signature(fn).parameters.values())
        module = fn.__module__.removeprefix("streamcrypt.")
        where = f"{module}.{fn.__qualname__.removesuffix('.__init__')}"

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> _T:
            if len(args) > fixed:
                extra = args[fixed:]
                if len(extra) > len(names):
                    raise TypeError(
                        f"{where}() takes at most {fixed + len(names)} positional arguments"
                    )
                given = names[: len(extra)]
                for name, value in zip(given, extra, strict=True):
                    if name in kwargs:
                        raise TypeError(f"{where}() got multiple values for argument {name!r}")
                    kwargs[name] = value
                warnings.warn(
                    f"{where}: passing {', '.join(given)} by position is deprecated, use "
                    f"{', '.join(n + '=' for n in given)} (positions stop working in the "
                    "next release)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                args = args[:fixed]
            return fn(*args, **kwargs)

        return wrapper

    return decorate
