"""How long does `inferfleet check` take on the homelab example without the network?

The homelab example declares Hub models whose files are not on this machine.
Each case is a fresh process, timed wall-clock from spawn to exit:

- validate:    `validate` of the same file (the schema alone: start-up and load);
- offline:     `check --offline` (no request; the Hub models' rules skip, one cause);
- refused:     `check` with HF_ENDPOINT on a loopback port nothing listens on;
- no_dns:      `check` with HF_ENDPOINT on a name that does not resolve (.invalid, RFC 6761).

The two unreachable cases must be final after one try (hub/reach.py): no
retry loop, one line per cause. Target: every check case under 2 s, and the
refused and no_dns cases within 0.5 s of offline. Each case's lines of output
are recorded too (one per cause, plus the summary).

    .venv/bin/python benchmarks/check_offline.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import Row, record

ROOT = Path(__file__).resolve().parents[1]
HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
CLI = [sys.executable, "-m", "inferfleet"]


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed on return: nothing listens there


def cases() -> dict[str, tuple[list[str], dict[str, str]]]:
    check = [*CLI, "check", str(HOMELAB)]
    return {
        "validate": ([*CLI, "validate", str(HOMELAB)], {}),
        "offline": ([*check, "--offline"], {}),
        "refused": (check, {"HF_ENDPOINT": f"http://127.0.0.1:{_refused_port()}"}),
        "no_dns": (check, {"HF_ENDPOINT": "https://hub.inferfleet.invalid"}),
    }


def timed(argv: list[str], env: dict[str, str], cache: str) -> tuple[float, int]:
    full = os.environ | {"COLUMNS": "200", "INFERFLEET_CACHE_DIR": cache} | env
    full.pop("HF_HUB_OFFLINE", None)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, cwd=ROOT, env=full, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return elapsed, len(done.stdout.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="check-offline-") as cache:  # nothing cached
        table = cases()
        samples: dict[str, list[float]] = {name: [] for name in table}
        lines: dict[str, int] = {}
        for _ in range(args.runs):
            for name, (argv, env) in table.items():
                elapsed, lines[name] = timed(argv, env, cache)
                samples[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{'case':<10} {'median':>8} {'max':>8} {'lines':>6}")
    for name, values in samples.items():
        print(f"{name:<10} {medians[name]:8.3f} {max(values):8.3f} {lines[name]:6d}")
    figures: dict[str, float] = {f"{name}_s": value for name, value in medians.items()}
    figures |= {f"{name}_lines": float(count) for name, count in lines.items()}
    ref = "validate (same file)"
    record(
        "check_offline",
        figures,
        rows=[
            Row("offline_s", "check --offline (homelab)", "s", True, "validate_s", ref, 2.0),
            Row("refused_s", "check, Hub refuses (homelab)", "s", True, "validate_s", ref, 2.0),
            Row("no_dns_s", "check, Hub name unresolved", "s", True, "validate_s", ref, 2.0),
        ],
        notes={"runs": args.runs, "target": "each check case < 2 s, one line per cause"},
    )


if __name__ == "__main__":
    main()
