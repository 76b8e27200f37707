"""Re-keying an envelope: the same file key wrapped to other recipients, the payload's
segments untouched (sans-I/O: the old headers' bytes in, the new ones' out).

What changes is the envelope header (its stanzas and MAC) and the container header's
tag: the container's associated data is the envelope header (and the caller's ``aad``),
bound through the container header tag only (docs/FORMAT.md), so the segments, sealed
with empty associated data under the payload key, stay valid. Both old tags are checked
before anything is rewritten. No envelope stanza names its key (the check value is keyed
by the stanza's shared secret), so a recipient is removed only when the caller also gives
its identity. A signed envelope is refused: its signature covers the header.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from ...abc import Buffer, as_bytes
from ...errors import AuthenticationError, InvalidParameterError, TruncatedStreamError
from ...keys import MAX_READ_PARAMS, MAX_SCRYPT_READ_PARAMS, Argon2Params, ScryptParams
from .. import _stanza, container
from .._stanza import IdentityLike, Recipient, RecipientLike, Stanza
from ._header import _encode_header, _keys, _mac, _parse_header
from ._recipients import (
    _RECIPIENTS,
    _identity_list,
    _open_file_key,
    _unwrap,
    _wrap,
)


def _never(stanza: Stanza, recipient: Recipient) -> bool:
    """No envelope stanza names its key."""
    return False


def rekey_header(
    head: Buffer,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    add: Iterable[RecipientLike] | RecipientLike = (),
    remove: Iterable[RecipientLike] | RecipientLike = (),
    aad: Buffer = b"",
    max_work_factor: Argon2Params = MAX_READ_PARAMS,
    max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
) -> tuple[bytes, int]:
    """The envelope and container headers of the envelope starting ``head``, re-keyed:
    recipients ``add``ed, ``remove``d, or replaced by ``recipients`` (the whole new list;
    alone); returns the new headers and the old ones' length (the segments after them
    stay as they are).

    ``identities`` / ``passphrase`` (and the ``aad`` it was written with) must open it.
    Raises :class:`UnknownKeyError` (they do not, or a recipient to remove was not told
    apart: give its identity too), :class:`AuthenticationError` (a header tag fails),
    :class:`InvalidParameterError` (a signed envelope, no recipient left, two
    passphrases, over 64 stanzas), :class:`FormatError` and :class:`TruncatedStreamError`
    (``head`` ends inside the headers).
    """
    raw = bytes(head)
    parsed = _parse_header(raw)
    if isinstance(parsed, int):
        raise TruncatedStreamError("the data ends inside the envelope header")
    if parsed.signed:
        raise InvalidParameterError(
            "a signed envelope cannot be re-keyed: its signature covers the header "
            "(decrypt and encrypt it again to sign it anew)"
        )
    idents = _identity_list(identities, passphrase, max_work_factor, max_scrypt)
    whole, adding, removing = map(_RECIPIENTS.keys, (recipients, add, remove))
    associated = as_bytes(aad, "aad")
    file_key = _open_file_key(parsed, idents, associated)
    mac_key, payload_key = _keys(file_key)
    inner = raw[parsed.size : parsed.size + container.MAX_HEADER_SIZE]
    found = container.read_header(inner)
    if found is None or len(inner) < found[1] + container.TAG_SIZE:
        raise TruncatedStreamError("the data ends inside the envelope's container header")
    _, tag_at = found
    cbody = inner[:tag_at]
    _, old_tag = container._derive(payload_key, cbody, parsed.raw + associated)
    if not hmac.compare_digest(old_tag, inner[tag_at : tag_at + container.TAG_SIZE]):
        raise AuthenticationError(
            "the envelope's container header did not authenticate: a tampered header"
        )
    stanzas = _stanza.rekeyed_stanzas(
        parsed.stanzas,
        file_key,
        idents,
        whole,
        adding,
        removing,
        opens=_unwrap,
        names=_never,
        wrap=_wrap,
    )
    new_body = _encode_header(stanzas, None)
    new_raw = new_body + _mac(mac_key, new_body, associated)
    _, tag = container._derive(payload_key, cbody, new_raw + associated)
    return new_raw + cbody + tag, parsed.size + tag_at + container.TAG_SIZE
