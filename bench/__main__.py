"""`python -m bench [--smoke]`: run the benchmarks, print the table, write the results."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path

from bench.delegation import HOP_IN_NOISE
from bench.plan import FULL, SECTIONS, SMOKE
from bench.report import RESULTS_DIR, TARGETS, Results, baseline_table, table, write_results
from bench.run import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--smoke", action="store_true", help="small counts: only checks that every figure is produced"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="where latest.json and a dated copy go (default: bench/results; a smoke run writes none)",
    )
    parser.add_argument(
        "--only",
        type=lambda value: frozenset(value.split(",")),
        default=frozenset(),
        help=f"comma-separated sections to run (of {', '.join(SECTIONS)}); writes no results unless "
        "--results-dir is given",
    )
    parser.add_argument("--log-dir", type=Path, help="service logs (default: a temporary directory)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if unknown := args.only - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    logging.basicConfig(
        level=logging.INFO if args.verbose or not args.smoke else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    plan = SMOKE if args.smoke else FULL
    with tempfile.TemporaryDirectory(prefix="agentmesh-bench-") as scratch:
        log_dir = args.log_dir or Path(scratch)
        document = asyncio.run(run(plan, log_dir=log_dir, only=args.only))
    print_summary(document)
    results_dir = args.results_dir or (None if args.smoke or args.only else RESULTS_DIR)
    if results_dir is not None:
        latest, dated = write_results(document, results_dir)
        print(f"\nwrote {latest} and {dated.name}")
    missing = [key for key in TARGETS if document["figures"][key] is None]
    if missing and not args.only:
        print(f"\nnot produced: {', '.join(missing)}", file=sys.stderr)
    # A smoke run fails when a figure is missing, unless only because its yardstick measured
    # within the noise (small counts on a busy host): that is a measurement, not a broken harness.
    # A full run is a measurement: it reports misses.
    broken = [key for key in missing if HOP_IN_NOISE not in document["missing"].get(key, "")]
    return 1 if args.smoke and broken else 0


def print_summary(document: dict) -> None:
    results = Results(plan=document["plan"])
    results.figures.update(document["figures"])
    results.missing.update(document["missing"])
    results.checks.update(document["checks"])
    print(f"\nagentmesh bench ({document['plan']}, {document['duration_seconds']} s)")
    if document["plan"] != "full":
        print("(small counts: every figure is produced, none of them means anything)")
    print(table(results))
    print("\nbaselines (same run):")
    print(baseline_table(document["baselines"]))
    if document["details"].get("failed_sections"):
        print("\nfailed sections:\n" + json.dumps(document["details"]["failed_sections"], indent=2))


if __name__ == "__main__":
    sys.exit(main())
