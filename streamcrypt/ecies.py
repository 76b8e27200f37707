"""Deprecated: ECIES moved to :mod:`streamcrypt.codecs.ecies`.

``import streamcrypt.ecies`` and ``from streamcrypt import ecies`` keep working for one
release with a :class:`DeprecationWarning`; every name is the one in
:mod:`streamcrypt.codecs.ecies`.
"""

from __future__ import annotations

from .codecs import ecies as _moved
from .codecs.ecies import *  # noqa: F403  (every public name of the new home)
from .deprecation import warn_renamed

__all__ = list(_moved.__all__)

warn_renamed("streamcrypt.ecies", "streamcrypt.codecs.ecies")
