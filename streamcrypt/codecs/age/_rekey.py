"""Re-keying an age header: the same file key wrapped to other recipients, the payload
untouched (sans-I/O: the old header's bytes in, the new header's bytes out).

The file key is unwrapped with the caller's identities and the old header's MAC checked,
so a header is never re-MACed unless it was authentic. The kept stanzas are copied as
they are (unknown and plugin stanzas included), the added recipients' stanzas appended,
and the MAC computed anew under the same file key; the payload nonce and chunks that
follow the header stay valid, since they depend on the file key only.

Which stanza to remove: ssh-ed25519 and ssh-rsa stanzas carry their key's tag, so a
public key names them; an X25519 or ML-KEM stanza does not say whom it is for (age's
recipient privacy), so it is removed only when the caller also gives its identity. A
passphrase (scrypt) stanza must stay a file's only stanza: adding a recipient to a
passphrase file, or a passphrase to a file with recipients, is refused.

Aligned for a shared payload: :func:`rekey_headers` also writes the header with a grease
stanza (:func:`grease_stanza`) sized so that its length is the old header's modulo a
file system block, where ``streamcrypt.rekey`` can then clone the payload's blocks
rather than copy them. A grease stanza of an earlier re-key is dropped first (it
carries nothing); none goes beside a passphrase (scrypt) stanza, which must stay alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...abc import Buffer
from ...errors import TruncatedStreamError
from .. import _stanza
from .._stanza import Identity, IdentityLike, Recipient, RecipientLike, Stanza
from ._header import (
    DEFAULT_MAX_HEADER_SIZE,
    GREASE_TYPE,
    MIN_GREASE,
    _build_header,
    grease_stanza,
    parse_header,
    scrypt_not_alone,
)
from ._plugin_process import _KIND_LABELS, check_labels, wrap_labelled
from ._recipients import _RECIPIENTS, _identity_list, _open_file_key
from ._scrypt import DEFAULT_MAX_WORK_FACTOR
from ._ssh import names_stanza


def _opens(identity: Identity, stanza: Stanza) -> bytes | None:
    return identity.unwrap([stanza])


def rekey_header(
    head: Buffer,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    add: Iterable[RecipientLike] | RecipientLike = (),
    remove: Iterable[RecipientLike] | RecipientLike = (),
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> tuple[bytes, int]:
    """The header of the age file starting ``head``, re-keyed: recipients ``add``ed,
    ``remove``d, or replaced by ``recipients`` (the whole new list; alone); returns the
    new header and the old header's length (the payload nonce and chunks after it stay
    as they are). A grease stanza of an earlier re-key is dropped; none is added.

    ``identities`` / ``passphrase`` must unwrap the file key. Raises
    :class:`UnknownKeyError` (they do not, or a recipient to remove has no stanza that can
    be told apart), :class:`AuthenticationError` (the header MAC fails),
    :class:`InvalidParameterError` (no recipient left, a passphrase stanza not alone,
    post-quantum mixed with classic), :class:`FormatError` and
    :class:`TruncatedStreamError` (``head`` ends inside the header).
    """
    header, _, size = rekey_headers(
        head,
        0,
        identities=identities,
        passphrase=passphrase,
        recipients=recipients,
        add=add,
        remove=remove,
        max_work_factor=max_work_factor,
        max_header_size=max_header_size,
    )
    return header, size


def rekey_headers(
    head: Buffer,
    align: int,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    add: Iterable[RecipientLike] | RecipientLike = (),
    remove: Iterable[RecipientLike] | RecipientLike = (),
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
) -> tuple[bytes, bytes, int]:
    """As :func:`rekey_header` (and raising as it does), the file key unwrapped once for
    two headers: the new header, the same with a grease stanza that makes its length the
    old header's modulo ``align`` (a file system block; ``0``, or a header with a
    passphrase stanza, or one the grease would take past the reader's cap: the first
    header again), and the old header's length."""
    header = parse_header(head, max_size=max_header_size)
    if header is None:
        raise TruncatedStreamError("the data ends inside the age header")
    idents = _identity_list(identities, passphrase, max_work_factor)
    whole, adding, removing = map(_RECIPIENTS.keys, (recipients, add, remove))
    file_key = _open_file_key(header, idents)
    added: list[frozenset[str]] = []

    def wrap(recipient: Recipient, key: bytes) -> list[Stanza]:
        stanzas, labels = wrap_labelled(recipient, key)
        added.extend(labels)
        return stanzas

    stanzas = _stanza.rekeyed_stanzas(
        [s for s in header.stanzas if s.kind != GREASE_TYPE],
        file_key,
        idents,
        whole,
        adding,
        removing,
        opens=_opens,
        names=names_stanza,
        wrap=wrap,
    )
    old = {id(s) for s in header.stanzas}  # kept stanzas are the header's own objects
    kept = [s for s in stanzas if id(s) in old]
    _check_mix(kept, added)
    plain = _build_header(file_key, stanzas)
    pad = (header.size - len(plain)) % align if align else 0
    if not pad or scrypt_not_alone([*stanzas, grease_stanza(MIN_GREASE)]):
        return plain, plain, header.size
    pad += align if pad < MIN_GREASE else 0
    if len(plain) + pad > DEFAULT_MAX_HEADER_SIZE:  # what every reader takes
        return plain, plain, header.size
    return plain, _build_header(file_key, [*stanzas, grease_stanza(pad)]), header.size


def _check_mix(kept: list[Stanza], added: list[frozenset[str]]) -> None:
    """One label set for every recipient (:func:`check_labels`, as encrypting checks it),
    the kept stanzas' read from their types as the added ones' are (:data:`_KIND_LABELS`).
    A kept stanza of another type (a plugin's,
    or the grease age writes) says nothing of its labels and is left out: only what the
    header shows is checked. (An scrypt stanza not alone is refused by the header writer.)"""
    check_labels([*added, *(_KIND_LABELS[s.kind] for s in kept if s.kind in _KIND_LABELS)])
