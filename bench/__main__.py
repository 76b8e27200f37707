"""``make bench``: every benchmark section in one run, side by side, into bench/RESULTS.md.

``python -m bench [--quick] [SECTION ...]`` — sections: see SECTIONS below. A run of some
sections writes bench/RESULTS_<sections>.md instead, leaving the full run's file alone.
"""

from __future__ import annotations

import argparse
import importlib

from ._report import RESULTS, Report

SECTIONS = [
    "paths",
    "engine",
    "core",
    "formats",
    "rclone_aws",
    "sizes",
    "sockets",
    "http",
    "seeds",
    "backup",
    "cluster",
    "keys",
    "cli",
    "browser",
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("sections", nargs="*", default=SECTIONS)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    report = Report()
    # ``paths`` opts this process in to glibc keeping freed memory, as an application
    # would (bench/paths.py ``_as_an_application``): it runs last, so that no other
    # section measures under its allocator setting rather than a default process's.
    for name in sorted(args.sections, key=lambda name: name == "paths"):
        module = importlib.import_module(f"bench.{name}")
        module.run(report, quick=args.quick)
    if args.sections == SECTIONS:
        report.write()
    else:
        report.write(RESULTS.with_name(f"RESULTS_{'_'.join(args.sections)}.md"))


if __name__ == "__main__":
    main()
