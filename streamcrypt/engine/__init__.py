"""Layer 3: the async engine that drives sans-I/O transforms between sources and sinks."""

from __future__ import annotations

from ._adaptive import INLINE_BATCH, Controller
from ._batches import (
    CLAIM_SIZE,
    Emit,
    Job,
    OrderedBatches,
    fresh_bytes,
    ordered_calls,
    run_all,
    run_segmented,
    run_verified,
)
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
    "fresh_bytes",
    "ordered_calls",
    "pipeline",
    "run_all",
    "run_segmented",
    "run_verified",
    "wait_future",
]
