"""The AWS format's descriptor: what the top-level calls, files and the command use."""

from __future__ import annotations

from typing import Any, cast

from ...errors import InvalidParameterError
from .._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from .._segmented import SegmentLayout
from ._body import AwsDecryptor, AwsEncryptor
from ._header import (
    _RESERVED_PREFIX,
    DEFAULT_FRAME_LENGTH,
    DEFAULT_MAX_ENCRYPTED_DATA_KEYS,
    DEFAULT_MAX_FRAME_LENGTH,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_SUITE,
    SUITES,
    header_size,
    is_aws,
    serialize_encryption_context,
)
from ._keyrings import KeyringLike, _keyrings
from ._layout import layout


def _check(options: FormatOptions, mode: str) -> None:
    _keyrings(cast("KeyringLike", options.key))
    context = dict(options.encryption_context or {})
    serialize_encryption_context(context)  # types and sizes
    if mode == "rb":
        return
    suite = SUITES.get(or_default(options.suite, DEFAULT_SUITE))
    if suite is None or not (suite.committing or options.allow_legacy):
        raise InvalidParameterError(
            f'format="aws" writes the committing suites 0x0578 and 0x0478 (the legacy ones '
            f"with allow_legacy=True), not {options.suite!r}"
        )
    frame = options.segment_size
    if frame is not None and not 0 < frame <= DEFAULT_MAX_FRAME_LENGTH:
        raise InvalidParameterError(
            f"segment_size= (the frame length) must be 1 .. {DEFAULT_MAX_FRAME_LENGTH} (what "
            "readers accept); non-framed messages: codecs.aws.AwsEncryptor(frame_length=0)"
        )
    if any(k.startswith(_RESERVED_PREFIX) for k in context):
        raise InvalidParameterError(
            f"encryption context keys starting with {_RESERVED_PREFIX!r} are reserved"
        )


def _encryptor(options: FormatOptions) -> AwsEncryptor:
    return AwsEncryptor(
        cast("KeyringLike", options.key),
        encryption_context=options.encryption_context,
        suite=or_default(options.suite, DEFAULT_SUITE),
        frame_length=or_default(options.segment_size, DEFAULT_FRAME_LENGTH),
        allow_legacy=options.allow_legacy,
        max_encrypted_data_keys=options.max_encrypted_data_keys,
    )


def _reading(options: FormatOptions) -> dict[str, Any]:
    """The keywords the decryptor and the layout share."""
    return {
        "encryption_context": options.encryption_context,
        "allow_legacy": options.allow_legacy,
        "allow_unverified": options.allow_unverified,
        "max_encrypted_data_keys": or_default(
            options.max_encrypted_data_keys, DEFAULT_MAX_ENCRYPTED_DATA_KEYS
        ),
    }


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    return layout(cast("KeyringLike", options.key), read_at, stream_size, **_reading(options))


#: The AWS Encryption SDK's format descriptor, framed (``key``: a keyring or a list of
#: them; ``suite``: ``"0x0578"`` (default) or ``"0x0478"``; ``segment_size``: the frame
#: length; ``encryption_context``). Its layout reads past the header: it locates the final
#: frame from the message's end, and for signed suites reads the whole message once to
#: verify the signature before any range is released.
FORMAT = SegmentedFormat(
    "aws",
    encryptor=_encryptor,
    decryptor=lambda o: AwsDecryptor(cast("KeyringLike", o.key), **_reading(o)),
    writes=frozenset(
        {"key", "suite", "segment_size", "encryption_context", "allow_legacy"}
        | {"max_encrypted_data_keys"}
    ),
    reads=frozenset(
        {"key", "encryption_context", "allow_legacy", "allow_unverified"}
        | {"max_encrypted_data_keys"}
    ),
    check=_check,
    detect=is_aws,
    header_size=header_size,
    max_header_size=DEFAULT_MAX_HEADER_SIZE,
    layout=_layout,
    opens_files=True,
)
