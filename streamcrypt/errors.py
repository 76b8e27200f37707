"""The error hierarchy: one root, typed leaves, builtin bases where callers expect them.

Every class carries ``http_status`` so HTTP adapters map an error with one attribute
lookup. Messages say what failed and what to check; they never contain key bytes or
plaintext.
"""

from __future__ import annotations

__all__ = [
    "AccessDeniedError",
    "AlreadyFinalizedError",
    "AuthenticationError",
    "BrokenTransformError",
    "FileChangedError",
    "FormatError",
    "HandshakeError",
    "InsecureKeyFileWarning",
    "InvalidKeySizeError",
    "InvalidNonceSizeError",
    "InvalidPaddingError",
    "InvalidParameterError",
    "InvalidPublicKeyError",
    "InvalidSignatureError",
    "InvalidTagSizeError",
    "LimitExceededError",
    "NotFinalizedError",
    "PeerRejectedError",
    "PeerTimeoutError",
    "PluginError",
    "SnapshotNotFoundError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StreamCryptError",
    "TokenError",
    "TokenPinError",
    "TruncatedStreamError",
    "UnknownKeyError",
    "UnsafePathError",
    "UnsupportedFormatError",
    "UntrustedRecipientError",
]


class StreamCryptError(Exception):
    """Root of every error streamcrypt raises on purpose."""

    http_status: int = 400


class AuthenticationError(StreamCryptError):
    """A tag, header MAC or signature did not verify.

    This is the single authentication failure: wrong key, wrong associated data,
    tampering, reordering and duplication all end here, deliberately indistinguishable.
    """


class InvalidSignatureError(AuthenticationError):
    """A signature did not verify under the given public key."""


class TruncatedStreamError(StreamCryptError):
    """The input ended before the authenticated end of the stream."""


class FormatError(StreamCryptError):
    """Malformed header, framing or encoding."""


class UnsupportedFormatError(FormatError):
    """Well-formed but not supported here: unknown version, suite or content encoding."""

    http_status = 415


class InvalidPaddingError(FormatError):
    """Block-cipher padding is malformed (unauthenticated modes only)."""


class UnknownKeyError(StreamCryptError, KeyError):
    """No key (or identity) known here matches what the input names."""

    def __str__(self) -> str:  # KeyError.__str__ would repr() the message
        return str(self.args[0]) if self.args else "unknown key"


class UntrustedRecipientError(UnknownKeyError):
    """A write-only backup store's config lists a recipient its owner did not vouch for
    (not the public key of an identity given, nor a recipient named): the owner's prune
    and rekey wrap nothing to it. The message names the recipients refused."""


class HandshakeError(StreamCryptError):
    """A key-exchange handshake failed or was refused."""


class PeerRejectedError(HandshakeError):
    """The peer's static key was refused by the caller's policy."""


class PeerTimeoutError(StreamCryptError, TimeoutError):
    """The peer made no progress within a timeout (a stalled handshake, record or body)."""

    http_status = 408


class PluginError(StreamCryptError):
    """An age plugin failed: not found on ``PATH``, exited or hung, sent more than the
    protocol's caps or something out of protocol, or reported an error of its own (its
    message is quoted)."""

    http_status = 502


class LimitExceededError(StreamCryptError, OverflowError):
    """A size or counter limit was reached (segment counter, record size, work factor)."""

    http_status = 413


class InvalidParameterError(StreamCryptError, ValueError):
    """An argument is out of range or of the wrong kind."""


class UnsafePathError(StreamCryptError, ValueError):
    """A name from outside (an object key, a snapshot path, an rclone name) would leave
    the directory or prefix it belongs under, or is not a usable name."""


class InvalidKeySizeError(InvalidParameterError):
    """A key has the wrong length; the message names the expected length."""


class InvalidNonceSizeError(InvalidParameterError):
    """A nonce or IV has the wrong length; the message names the expected length."""


class InvalidTagSizeError(InvalidParameterError):
    """A tag has the wrong length; the message names the expected length."""


class InvalidPublicKeyError(InvalidParameterError):
    """A public key is malformed, not on the curve, or of low order."""


class AlreadyFinalizedError(StreamCryptError, RuntimeError):
    """The transform was already finalized; create a new one."""


class NotFinalizedError(StreamCryptError, RuntimeError):
    """A result (digest, signature) was asked for before ``finalize()`` saw the whole input."""


class BrokenTransformError(StreamCryptError, RuntimeError):
    """A previous call failed and left the transform unusable.

    ``__cause__`` holds the first failure.
    """


class TokenError(StreamCryptError):
    """A PKCS#11 token or its library failed: the module did not load, no token has the
    label given, the token refused an operation, or a key there is not usable as it is
    (extractable, of another type). The message names the module and token, never a PIN.
    """

    http_status = 503


class TokenPinError(TokenError):
    """A PKCS#11 token refused the PIN (wrong, locked or expired), or no PIN was given."""


class FileChangedError(StreamCryptError):
    """A file changed on disk while streamcrypt was replacing it (re-keying it): another
    name, another size or time. Nothing was replaced; the other writer's file stands."""

    http_status = 409


class StoreLockedError(StreamCryptError):
    """A backup store is locked by another process (a backup, prune or forget in progress).

    The message names the holder (host, process id, age); a lock whose process is gone
    is removed automatically.
    """

    http_status = 409


class AccessDeniedError(StreamCryptError, PermissionError):
    """A store server refused the request: no or wrong credentials, or an append-only
    server asked to overwrite or delete (forget and prune need the owner's token)."""

    http_status = 403


class SnapshotNotFoundError(StreamCryptError, FileNotFoundError):
    """A backup store holds no snapshot of the name given (for ``latest``: none at all).
    Also a ``FileNotFoundError``, as a missing file is."""

    http_status = 404


class StoreNotFoundError(StreamCryptError, FileNotFoundError):
    """No backup store at the location given (no config there): a store is made only by
    ``backup init`` (``create_store`` / ``create_write_only``), never by a backup, so a
    mistyped path or an unmounted disk is refused. Also a ``FileNotFoundError``."""

    http_status = 404


class InsecureKeyFileWarning(StreamCryptError, UserWarning):
    """A file holding a secret (a key file, an identity, a passphrase file) may be read or
    written by other users (group or other permission bits set), as OpenSSH refuses; a
    warning, not an error, since container runtimes mount secrets 0644. Fix with
    ``chmod 600``; silence with :mod:`warnings` filters."""
