"""Chunked, deduplicating, encrypted backups: the store and its operations (layer 5).

A store lives on any fsspec file system (a local directory, or ``s3://...`` with the
right fsspec plugin). Its format is :mod:`streamcrypt.codecs.backup`; the layout, what is
encrypted and authenticated, and what leaks are in docs/BACKUP.md. Every operation is
async (anyio: asyncio or trio), runs its blocking and CPU work on the engine's worker
threads under an :class:`~streamcrypt.engine.OffloadPolicy`, and takes the store's lock.
A store is made once, explicitly (:func:`create_store`; a backup never makes one)::

    await create_store("/mnt/store", key)
    report = await backup("~/Documents", "/mnt/store", key)
    await restore("/mnt/store", "latest", "./restored", key)
    assert (await verify("/mnt/store", key)).ok

Wherever a snapshot name is taken, :data:`LATEST` (``"latest"``) names the newest one.
A store may also live behind a REST server (``rest:http://user:TOKEN@host:port/``):
:class:`RestServer` is one, append-only for writers (``streamcrypt backup serve``).

A *write-only* store (:func:`create_write_only`) is made with age recipients: the
machine that backs up holds only the writer key it returns, which backs up but opens
nothing; restore, verify, forget, prune and :func:`rekey` take ``identities=``::

    writer = await create_write_only("/mnt/store", "age1...")
    await backup("~/Documents", "/mnt/store", writer)
    await restore("/mnt/store", "latest", "./restored", identities=identity)

Needs the ``backup`` extra (``pyfastcdc``, ``zstandard``, ``fsspec``).
"""

from __future__ import annotations

from ._backup import BackupReport, Progress, backup, default_snapshot_name, salvage
from ._maintain import (
    Problem,
    PruneReport,
    VerifyReport,
    forget,
    list_snapshots,
    prune,
    verify,
)
from ._restore import RestoreReport, restore
from ._server import RestServer
from ._store import (
    LATEST,
    LOCK_CLOCK_SKEW_SECONDS,
    LOCK_STALE_SECONDS,
    Index,
    Location,
    Store,
    create_store,
    shown_location,
)
from ._writeonly import create_write_only, rekey

__all__ = [
    "LATEST",
    "LOCK_CLOCK_SKEW_SECONDS",
    "LOCK_STALE_SECONDS",
    "BackupReport",
    "Index",
    "Location",
    "Problem",
    "Progress",
    "PruneReport",
    "RestServer",
    "RestoreReport",
    "Store",
    "VerifyReport",
    "backup",
    "create_store",
    "create_write_only",
    "default_snapshot_name",
    "forget",
    "list_snapshots",
    "prune",
    "rekey",
    "restore",
    "salvage",
    "shown_location",
    "verify",
]
