"""``make bench``: every benchmark section in one run, side by side, into bench/RESULTS.md.

``python -m bench [--quick] [SECTION ...]`` — sections: see SECTIONS below.
"""

from __future__ import annotations

import argparse
import importlib

from ._report import Report

SECTIONS = ["paths", "engine", "core", "formats", "sizes", "sockets", "http", "cluster"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("sections", nargs="*", default=SECTIONS)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    report = Report()
    for name in args.sections:
        module = importlib.import_module(f"bench.{name}")
        module.run(report, quick=args.quick)
    report.write()


if __name__ == "__main__":
    main()
