"""Layer 3: the async engine that drives sans-I/O transforms between sources and sinks."""

from __future__ import annotations

from ..lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._adaptive import INLINE_BATCH, Controller
    from ._batches import (
        CLAIM_SIZE,
        Emit,
        Job,
        OrderedBatches,
        ordered_calls,
        run_all,
        run_segmented,
        run_verified,
    )
    from ._memory import keep_freed_memory
    from ._offload import (
        DEFAULT_BATCH_SIZE,
        DEFAULT_INLINE_LIMIT,
        DEFAULT_MAX_IN_FLIGHT,
        DEFAULT_POLICY,
        DEFAULT_WORKERS,
        OffloadPolicy,
        wait_future,
    )
    from ._pipeline import Feeder, Pipeline, Sink, Source, pipeline
    from ._sync import WriteBehind, run_in_turns

__all__ = [
    "CLAIM_SIZE",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_INLINE_LIMIT",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_POLICY",
    "DEFAULT_WORKERS",
    "INLINE_BATCH",
    "Controller",
    "Emit",
    "Feeder",
    "Job",
    "OffloadPolicy",
    "OrderedBatches",
    "Pipeline",
    "Sink",
    "Source",
    "WriteBehind",
    "keep_freed_memory",
    "ordered_calls",
    "pipeline",
    "run_all",
    "run_in_turns",
    "run_segmented",
    "run_verified",
    "wait_future",
]

# Where each name is defined: imported from there on first use (the async pipeline
# brings anyio; synchronous callers such as the command line need only the batches).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "._adaptive": ("INLINE_BATCH", "Controller"),
        "._batches": (
            "CLAIM_SIZE",
            "Emit",
            "Job",
            "OrderedBatches",
            "ordered_calls",
            "run_all",
            "run_segmented",
            "run_verified",
        ),
        "._memory": ("keep_freed_memory",),
        "._offload": (
            "DEFAULT_BATCH_SIZE",
            "DEFAULT_INLINE_LIMIT",
            "DEFAULT_MAX_IN_FLIGHT",
            "DEFAULT_POLICY",
            "DEFAULT_WORKERS",
            "OffloadPolicy",
            "wait_future",
        ),
        "._pipeline": ("Feeder", "Pipeline", "Sink", "Source", "pipeline"),
        "._sync": ("WriteBehind", "run_in_turns"),
    },
)
