"""age's recipient and identity protocols, their text forms, and how a header's file
key is found: each identity in turn, shown all stanzas (as age's identities are)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from functools import partial

from ...abc import Buffer
from ...errors import AuthenticationError, FormatError, InvalidParameterError
from .. import _stanza
from .._bech32 import bech32_decode
from .._stanza import Identity, IdentityLike, Recipient, RecipientLike
from .._x25519 import PREFIXES, X25519Identity, X25519Recipient
from ._header import FILE_KEY_SIZE, AgeHeader, _header_mac, scrypt_not_alone
from ._mlkem import _HRP_PQ, _HRP_PQ_SECRET, MLKEM768X25519Identity, MLKEM768X25519Recipient
from ._plugin_process import (
    PluginIdentity,
    PluginRecipient,
    check_labels,
    labels_before_wrapping,
    plugin_name,
)
from ._scrypt import ScryptIdentity, ScryptRecipient
from ._ssh import (
    _PEM_BEGIN,
    _SSH_PREFIXES,
    _SSH_RSA,
    SshEd25519Identity,
    SshEd25519Recipient,
    SshRsaIdentity,
    SshRsaRecipient,
    _ssh_identity,
)

#: What :func:`parse_recipient` returns.
AnyRecipient = (
    X25519Recipient
    | MLKEM768X25519Recipient
    | SshEd25519Recipient
    | SshRsaRecipient
    | PluginRecipient
)
#: What :func:`parse_identity` returns.
AnyIdentity = (
    X25519Identity | MLKEM768X25519Identity | SshEd25519Identity | SshRsaIdentity | PluginIdentity
)


def parse_recipient(text: str) -> AnyRecipient:
    """Parse ``age1...`` (or the same X25519 key as ``sc-x25519-pub1...``), ``age1pq1...``,
    an SSH public key line (``ssh-ed25519 AAAA...``, ``ssh-rsa AAAA...``) or a plugin
    recipient (``age1NAME1...``, wrapped by ``age-plugin-NAME``).

    Raises :class:`FormatError` (:class:`UnsupportedFormatError` for another SSH key type,
    :class:`InvalidKeySizeError` for an RSA key under 2048 bits).
    """
    if text.startswith(_SSH_RSA + " "):
        return SshRsaRecipient.parse(text)
    if text.startswith(_SSH_PREFIXES):
        return SshEd25519Recipient.parse(text)
    hrp, _ = bech32_decode(text)
    if hrp == _HRP_PQ:
        return MLKEM768X25519Recipient.parse(text)
    if hrp in (prefix for prefix, _ in PREFIXES.values()):
        return X25519Recipient.parse(text)
    if plugin_name(hrp, "recipient") is not None:
        return PluginRecipient(text)
    raise FormatError(
        "unknown age recipient type: expected age1..., age1pq1..., age1NAME1... (a plugin), "
        "ssh-ed25519 or ssh-rsa"
    )


def parse_identity(text: str) -> AnyIdentity:
    """Parse ``AGE-SECRET-KEY-1...``, ``AGE-SECRET-KEY-PQ-1...``, a plugin identity
    (``AGE-PLUGIN-NAME-1...``) or an unencrypted SSH (Ed25519 or RSA, OpenSSH or PEM)
    private key file's text; raises :class:`FormatError`."""
    if text.lstrip().startswith(_PEM_BEGIN):
        return _ssh_identity(text)
    hrp, _ = bech32_decode(text)
    if hrp == _HRP_PQ_SECRET:
        return MLKEM768X25519Identity.parse(text)
    if hrp in (prefix for _, prefix in PREFIXES.values()):
        return X25519Identity.parse(text)
    if plugin_name(hrp, "identity") is not None:
        return PluginIdentity(text)
    raise FormatError(
        "unknown age identity type: expected AGE-SECRET-KEY-1..., -PQ-1... or AGE-PLUGIN-NAME-1..."
    )


def parse_identities(text: str) -> list[AnyIdentity]:
    """Parse an identity file: one key a line, blank lines and ``#`` comments skipped, or
    a whole SSH private key file (as age's ``-i ~/.ssh/id_ed25519`` or ``id_rsa``)."""
    keys = [parse_identity(key) for key in _stanza.key_lines(text)]
    if not keys:
        raise FormatError("the identity file holds no identity")
    return keys


_RECIPIENTS: _stanza.KeyList[Recipient] = _stanza.KeyList(
    "wrap",
    parse_recipient,
    "a recipient must be an age1..., age1pq1..., age1NAME1..., ssh-ed25519 or ssh-rsa string "
    "or a Recipient",
    "give at least one recipient or a passphrase",
)
_IDENTITIES: _stanza.KeyList[Identity] = _stanza.KeyList(
    "unwrap",
    parse_identity,
    "an identity must be an AGE-SECRET-KEY-... or AGE-PLUGIN-... string, an SSH private "
    "key file's text "
    "or an Identity",
    "give at least one identity or a passphrase",
)


def _recipient_list(
    recipients: Iterable[RecipientLike] | RecipientLike,
    passphrase: str | Buffer | None,
    work_factor: int,
) -> list[Recipient]:
    out = _RECIPIENTS(recipients, passphrase, lambda p: ScryptRecipient(p, work_factor=work_factor))
    if len(out) > 1 and any(isinstance(r, ScryptRecipient) for r in out):
        raise InvalidParameterError("a passphrase must be a file's only recipient in age")
    # refused now when the recipients' classes tell; plugins declare their labels when they
    # wrap, and wrap_all checks every stanza written by the same rule
    check_labels(labels_before_wrapping(r) for r in out if not isinstance(r, PluginRecipient))
    return out


def _identity_list(
    identities: Iterable[IdentityLike] | IdentityLike,
    passphrase: str | Buffer | None,
    max_work_factor: int,
) -> list[Identity]:
    return _IDENTITIES(
        identities, passphrase, lambda p: ScryptIdentity(p, max_work_factor=max_work_factor)
    )


def _no_match(identities: Sequence[Identity]) -> str:
    if any(isinstance(i, ScryptIdentity) for i in identities):
        return (
            "no identity matched the age file: wrong passphrase, "
            "or the file was encrypted to recipients rather than a passphrase"
        )
    return "no identity matched the age file: it was encrypted to other recipients"


def _open_file_key(header: AgeHeader, identities: Sequence[Identity]) -> bytes:
    """Each identity in turn, shown all stanzas (as age's identities are)."""
    stanzas = header.stanzas
    if scrypt_not_alone(stanzas):
        raise FormatError("an age scrypt stanza must be the only stanza in the header")
    file_key = _stanza.open_file_key(
        (partial(i.unwrap, stanzas) for i in identities), lambda: _no_match(identities)
    )
    if len(file_key) != FILE_KEY_SIZE:
        raise FormatError(f"the unwrapped age file key is not {FILE_KEY_SIZE} bytes")
    if not hmac.compare_digest(_header_mac(file_key, header.mac_input), header.mac):
        raise AuthenticationError(
            "age header MAC did not verify: the header was tampered with "
            "(or a stanza was crafted for this identity)"
        )
    return file_key
