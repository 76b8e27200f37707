"""Encryption jobs on a Dask cluster, storage through fsspec (the ``streamcrypt[dask]`` extra).

See docs/CLUSTER.md. Many objects: :func:`encrypt_objects`, :func:`decrypt_objects`,
:func:`rekey_objects`, :func:`verify_objects`, one task per object. One huge object:
:func:`encrypt_ranges`, :func:`verify_ranges`, one task per range of whole segments. Keys
reach the workers through providers (:class:`EnvKey`, :class:`FileKey`,
:class:`KeyRingFile`, :class:`TokenKey`, :class:`CallableKey`), never in pickles.
"""

from __future__ import annotations

from ._jobs import Failure, ObjectResult, Summary
from ._keys import CallableKey, EnvKey, FileKey, KeyProvider, KeyRingFile, TokenKey
from ._objects import (
    CryptOptions,
    decrypt_objects,
    encrypt_objects,
    rekey_objects,
    verify_objects,
)
from ._ranges import decrypt_ranges, encrypt_ranges, verify_ranges

__all__ = [
    "CallableKey",
    "CryptOptions",
    "EnvKey",
    "Failure",
    "FileKey",
    "KeyProvider",
    "KeyRingFile",
    "ObjectResult",
    "Summary",
    "TokenKey",
    "decrypt_objects",
    "decrypt_ranges",
    "encrypt_objects",
    "encrypt_ranges",
    "rekey_objects",
    "verify_objects",
    "verify_ranges",
]
