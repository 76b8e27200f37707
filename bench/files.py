"""The file table of the ``paths`` section alone: ``python -m bench files [--quick]``
(writes bench/RESULTS_files.md; run it alone, see ``bench.paths.run_files``)."""

from .paths import run_files as run

__all__ = ["run"]
