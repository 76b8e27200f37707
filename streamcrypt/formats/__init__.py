"""Layer 5: the standard formats as async streams on the engine.

Each module offers async ``encrypt(source, ...)`` / ``decrypt(source, ...)`` (async
iterators of bytes; large inputs use all cores through the engine's offload policy)
beside the one-shot ``encrypt_bytes`` / ``decrypt_bytes`` of its sans-I/O codec in
:mod:`streamcrypt.codecs`. The async functions live here, not in the codecs, because
codecs sit below the engine and never import it (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from . import age, aws, cobblestone, ece, rclone, secretstream, tink

__all__ = ["age", "aws", "cobblestone", "ece", "rclone", "secretstream", "tink"]
