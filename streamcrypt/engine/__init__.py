"""Layer 3: the async engine that drives sans-I/O transforms between sources and sinks.

What a user calls is in ``__all__``: :func:`pipeline` / :class:`Pipeline` (and the
:class:`Feeder` its ``feeder()`` returns), :class:`OffloadPolicy` and
:data:`DEFAULT_POLICY`, the :data:`Source` / :data:`Sink` types, and the application's
opt-in :func:`keep_freed_memory`. The other names below are the engine's plumbing for
streamcrypt's own layers (encrypted files and sockets, the backup store, the command,
the one-shot calls): importable from here, as layers import each other's public
modules, but not public API (docs/ENGINE.md).
"""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    # Plumbing re-exported for streamcrypt's own layers (``X as X``: not in ``__all__``).
    from ._adaptive import INLINE_BATCH as INLINE_BATCH
    from ._batches import CLAIM_SIZE as CLAIM_SIZE
    from ._batches import OrderedBatches as OrderedBatches
    from ._batches import ordered_calls as ordered_calls
    from ._batches import run_segmented as run_segmented
    from ._batches import run_verified as run_verified
    from ._memory import keep_freed_memory
    from ._offload import DEFAULT_MAX_IN_FLIGHT as DEFAULT_MAX_IN_FLIGHT
    from ._offload import DEFAULT_POLICY, OffloadPolicy
    from ._offload import DEFAULT_WORKERS as DEFAULT_WORKERS
    from ._offload import Pending as Pending
    from ._offload import Task as Task
    from ._offload import WorkerCalls as WorkerCalls
    from ._offload import run_io as run_io
    from ._offload import wait_future as wait_future
    from ._pipeline import Feeder, Pipeline, Sink, Source, pipeline
    from ._sync import WriteBehind as WriteBehind
    from ._sync import run_in_turns as run_in_turns

__all__ = [
    "DEFAULT_POLICY",
    "Feeder",
    "OffloadPolicy",
    "Pipeline",
    "Sink",
    "Source",
    "keep_freed_memory",
    "pipeline",
]

# Where each name is defined: imported from there on first use (the async pipeline
# brings anyio; synchronous callers such as the command line need only the batches).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "._adaptive": ("INLINE_BATCH",),
        "._batches": (
            "CLAIM_SIZE",
            "OrderedBatches",
            "ordered_calls",
            "run_segmented",
            "run_verified",
        ),
        "._memory": ("keep_freed_memory",),
        "._offload": (
            "DEFAULT_MAX_IN_FLIGHT",
            "DEFAULT_POLICY",
            "DEFAULT_WORKERS",
            "OffloadPolicy",
            "Pending",
            "Task",
            "WorkerCalls",
            "run_io",
            "wait_future",
        ),
        "._pipeline": ("Feeder", "Pipeline", "Sink", "Source", "pipeline"),
        "._sync": ("WriteBehind", "run_in_turns"),
    },
)
