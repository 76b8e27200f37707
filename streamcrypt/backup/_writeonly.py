"""Write-only stores: making one, changing its recipients, the writer's metadata cache.

A write-only store is made with age recipients (:func:`create_write_only`); the call
returns the *writer key*, the one secret a backup machine holds. Its format and threat
model are in :mod:`streamcrypt.codecs.backup` and docs/BACKUP.md. :func:`rekey` changes
the recipients by rewrapping the small key files in ``keys/`` (the writer's secret and
each session's); no pack, index file or snapshot is rewritten.

The writer reads no snapshot, so the metadata cache of its next backup (which files are
unchanged) is a file of its own: the last manifest of each source, sealed under a key of
the writer's secret, in a local directory (``cache_dir``; default
``$XDG_CACHE_HOME/streamcrypt/backup``), one file per store and source.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..codecs import IdentityLike, RecipientLike, one_or_many
from ..codecs.backup import (
    BackupKeys,
    Manifest,
    StoreConfig,
    listed_recipient,
    open_cache,
    open_key_file,
    recipient_texts,
    seal_cache,
    seal_key_file,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy
from ..errors import InvalidParameterError, StreamCryptError
from ..keys import SecretKey
from ..primitives import blake3_keyed
from ..transports import write_atomic
from ._store import Store, make_store
from ._work import run_blocking


async def create_write_only(
    location: str | os.PathLike[str],
    recipients: Iterable[RecipientLike] | RecipientLike,
    *,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
    **params: int,
) -> SecretKey:
    """Make a write-only store at ``location`` for age ``recipients`` and return its
    writer key (keep it on the backup machine; the identity stays elsewhere).

    ``params``: :class:`~streamcrypt.codecs.backup.StoreConfig` sizes. Raises
    ``FileExistsError`` when a store is there, :class:`FormatError` /
    :class:`InvalidParameterError` for a recipient that is not an age recipient.
    """
    texts = recipient_texts(recipients)
    writer = SecretKey.generate()
    keys = BackupKeys.writer(writer)
    config = replace(StoreConfig.new(keys, **params), recipients=texts)
    wrapped = [listed_recipient(text) for text in texts]

    sealed = await run_blocking(policy, seal_key_file, wrapped, "writer", writer.secret_bytes())
    await make_store(location, keys, config, {"keys/writer": sealed}, policy, storage_options)
    return writer


async def rekey(
    location: str | os.PathLike[str],
    *,
    identities: Iterable[IdentityLike] | IdentityLike,
    add: Iterable[RecipientLike] | RecipientLike = (),
    remove: Iterable[RecipientLike] | RecipientLike = (),
    signer: str | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
    storage_options: dict[str, Any] | None = None,
) -> tuple[str, ...]:
    """Add and remove recipients of a write-only store, rewrapping its key files (the
    data stays as it is); returns the new recipients.

    Every recipient kept must be vouched for (:meth:`Store.wrap_recipients`): the
    public key of one of ``identities`` or one in ``add`` (adding a recipient the store
    has keeps it); one only the config names is refused unless removed. ``remove``
    names a recipient by any text form of it, or a config entry by its exact text (the
    way to remove one that is no canonical recipient, which the config refuses
    otherwise: ``StoreConfig.decode``). Each key file is
    replaced atomically; a rekey killed midway leaves each wrapped to the old or the new
    recipients, and running it again with the same identity finishes it. Raises
    :class:`UnknownKeyError` when ``identities`` cannot unwrap the store's keys,
    :class:`UntrustedRecipientError` (a recipient kept that nobody vouched for),
    :class:`InvalidParameterError` (a symmetric store, a recipient to remove that is not
    one, no recipient left), :class:`StoreLockedError`, and with ``signer`` (as ``backup
    init`` printed it) :class:`InvalidSignatureError` when the config names another.
    """
    added = recipient_texts(add) if add else ()
    removed: tuple[RecipientLike, ...] = one_or_many(remove)
    opened = await Store.open(
        location,
        identities=identities,
        signer=signer,
        recipients=added,
        removing=[item for item in removed if isinstance(item, str)],
        policy=policy,
        storage_options=storage_options,
    )
    if not opened.config.write_only:
        raise InvalidParameterError("a symmetric store has no recipients to change")
    new = list(opened.config.recipients)
    for text in added:
        if text not in new:
            new.append(text)
    for item in removed:
        if isinstance(item, str) and item in new:  # the exact entry, canonical or not
            new.remove(item)
            continue
        for text in recipient_texts(item):
            if text not in new:
                raise InvalidParameterError(f"{text} is not a recipient of the store")
            new.remove(text)
    if not new:
        raise InvalidParameterError("a write-only store needs at least one recipient left")
    wrapped = opened.wrap_recipients(new)
    config = replace(opened.config, recipients=tuple(new))

    def rewrap() -> None:
        for name in opened._list_sync("keys", False):
            try:
                secret = open_key_file(identities, name, opened.read_sync(f"keys/{name}"))
            except StreamCryptError:
                continue  # not the store's (anyone can add one): verify reports it
            opened.write_sync(f"keys/{name}", seal_key_file(wrapped, name, secret))
        opened.write_sync("config", config.encode(opened.keys))

    async with opened.lock(exclusive=True):
        await opened._run(rewrap)
    return config.recipients


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/streamcrypt/backup`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamcrypt", "backup")


def _cache_path(store: Store, cache_dir: str | os.PathLike[str] | None, source: str) -> str:
    where = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
    tag = blake3_keyed(store.keys.cache, source.encode("utf-8", "surrogateescape"))[:16]
    return os.path.join(where, f"{store.config.store_id}-{tag.hex()}")


def load_cache(
    store: Store, cache_dir: str | os.PathLike[str] | None, source: str
) -> Manifest | None:
    """The writer's last manifest of ``source``, or ``None`` (no cache, or one that does
    not open: then every file is read, and dedup still holds through the id lists)."""
    try:
        with open(_cache_path(store, cache_dir, source), "rb") as f:
            data = f.read()
        return open_cache(store.keys, store.config.store_id, source, data)
    except (OSError, StreamCryptError):
        return None


def save_cache(
    store: Store, cache_dir: str | os.PathLike[str] | None, manifest: Manifest, packed: bytes
) -> None:
    """Keep ``manifest`` (``packed``: :meth:`Manifest.pack`, as the snapshot sealed it)
    as the writer's cache of its source (mode 0600).

    Replaced atomically but not fsynced: the cache is sealed, so whatever a crash leaves
    (the old cache, the new one, or a torn file that does not open) costs at most a
    re-read of the files, and the store's id lists decide what is stored.
    """
    path = _cache_path(store, cache_dir, manifest.source)
    os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
    sealed = seal_cache(store.keys, store.config.store_id, manifest, packed)
    write_atomic(path, sealed, mode=0o600, durable=False)
