"""Layer 5: the standard formats as async streams on the engine.

Each module offers async ``encrypt(source, ...)`` / ``decrypt(source, ...)`` (async
iterators of bytes; large inputs use all cores through the engine's offload policy) and,
for the formats that have them, one-shot ``encrypt_bytes`` / ``decrypt_bytes``. Every one
is a thin translation of its keywords into :class:`~streamcrypt.codecs.FormatOptions`
over :mod:`streamcrypt.formats.run`, the one runner of a format descriptor
(:data:`streamcrypt.codecs.FORMATS`). The async functions live here, not in the codecs,
because codecs sit below the engine and never import it (docs/ARCHITECTURE.md). The
modules load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import age, aws, cobblestone, ece, rclone, run, secretstream, tink

__all__ = ["age", "aws", "cobblestone", "ece", "rclone", "run", "secretstream", "tink"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(f".{name}", __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
