"""The long fuzz run of the fleet loader: mutated fleet files for N minutes, any traceback reported.

Run: .venv/bin/python benchmarks/fleet_fuzz.py [--minutes 10] [--seed S]

The bounded hypothesis run lives in ``tests/fleetfile/test_fleetfile_fuzz.py``;
this one reuses its mutations with a seeded ``random`` (no input
found by fuzzing the loader for 10 minutes yields a traceback or an
"internal error"). Each case must parse or raise ``SpecError``; the slowest
case and peak RSS are reported too. Exits 1 on any other exception, printing
the input that raised it.
"""

from __future__ import annotations

import argparse
import collections
import random
import resource
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests/fleetfile")]

from results import Row, record  # noqa: E402
from test_fleetfile_errors import BASE  # noqa: E402
from test_fleetfile_fuzz import mutate  # noqa: E402

from inferfleet.errors import SpecError  # noqa: E402
from inferfleet.fleetfile.loader import parse_fleet  # noqa: E402

SEEDS = [BASE, (ROOT / "examples/homelab/fleet.yaml").read_text()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    outcomes: collections.Counter[str] = collections.Counter()
    failures = 0
    slowest = (0.0, "")
    cases = 0
    while time.monotonic() < deadline:
        text = rng.choice(SEEDS)
        for _ in range(rng.randint(1, 3)):  # stacked mutations reach further
            text = mutate(rng, text)
        start = time.perf_counter()
        try:
            parse_fleet(text, Path("fleet.yaml"))
            outcomes["valid"] += 1
        except SpecError:
            outcomes["SpecError"] += 1
        except Exception as exc:  # the point of the run: anything else is a bug
            outcomes[type(exc).__name__] += 1
            failures += 1
            if failures <= 3:
                print(f"--- {type(exc).__name__} on input:\n{text!r}\n", file=sys.stderr)
                traceback.print_exc()
        took = time.perf_counter() - start
        if took > slowest[0]:
            slowest = (took, text)
        cases += 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{cases} cases in {args.minutes:g} min (seed {args.seed}): {dict(outcomes)}")
    print(f"slowest case {slowest[0] * 1000:.1f} ms; peak RSS {peak:.0f} MiB")
    print("no traceback" if failures == 0 else f"{failures} cases raised something else")
    record(
        "fleet_fuzz",
        {
            "cases": cases,
            "minutes": args.minutes,
            "other_exceptions": failures,
            "slowest_case_ms": slowest[0] * 1000,
            "peak_rss_mib": peak,
        },
        rows=[
            Row("other_exceptions", "cases raising other than SpecError", "cases", True, target=0),
            Row("slowest_case_ms", "slowest case", "ms", True),
            Row("cases", f"fleet files parsed in {args.minutes:g} min", "cases", False),
        ],  # fmt: skip
        notes={"seed": args.seed, "outcomes": dict(outcomes)},
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
