"""One reading of "a config object, or its fields as keywords" for the adapters' options."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from ..errors import InvalidParameterError

_Config = TypeVar("_Config")


def config_or_options(
    cls: type[_Config], given: _Config | None, options: dict[str, Any], keyword: str
) -> _Config:
    """``given`` (passed as ``keyword=``), or a ``cls`` built from keyword ``options``.

    Giving both, a ``given`` of another type, or an option ``cls`` has no field for raises
    :class:`InvalidParameterError` naming the accepted fields.
    """
    if given is not None:
        if options:
            raise InvalidParameterError(f"give {keyword}= or keyword options, not both")
        if not isinstance(given, cls):
            raise InvalidParameterError(
                f"{keyword} must be a {cls.__name__}, not {type(given).__name__}"
            )
        return given
    known = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidParameterError(
            f"unknown option(s) {', '.join(unknown)}; {cls.__name__} takes {', '.join(known)}"
        )
    return cls(**options)
