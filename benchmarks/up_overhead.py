"""What does `inferfleet up` add to a bare llama-server start?

Same binary, same argv, same model, same machine, in the same run:

- bare:       start llama-server with the argv `inferfleet show --json` prints,
              poll /health until 200 every 25 ms (as inferfleet's gate does);
- inferfleet: `inferfleet up --no-contract` as a fresh process (CLI start-up,
              fleet validation, runtime and model gates, start, health gate
              with the port-owner check, record), until it exits 0;
              and once more with the 16-token contract check, for reference.

Runs alternate (bare, inferfleet, ...) so drift hits both arms alike. Each
server is stopped by pid before the next run and the port is checked free.
Prints medians, spread and the ratio, and records them with results.py;
target: inferfleet adds < 0.15 s.

    .venv/bin/python benchmarks/up_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import yaml
from results import Row, record

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "local" / "fleet.yaml"
BARE = "bare llama-server"
INFERFLEET = [sys.executable, "-m", "inferfleet"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    return not any(
        c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
        for c in psutil.net_connections(kind="tcp")
    )


def wait_port_free(port: int) -> None:
    deadline = time.monotonic() + 30
    while not port_free(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"port {port} still held after 30 s")
        time.sleep(0.02)


def bare_run(argv: list[str], port: int, log: Path) -> float:
    url = f"http://127.0.0.1:{port}/health"
    with log.open("ab") as out:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with httpx.Client(timeout=5) as client:
            while True:
                try:
                    if client.get(url).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                if proc.poll() is not None:
                    raise SystemExit(f"bare llama-server exited; see {log}")
                time.sleep(0.025)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        wait_port_free(port)


def inferfleet_run(fleet: Path, port: int, env: dict[str, str], contract: bool) -> float:
    args = [*INFERFLEET, "up", str(fleet), "--json"] + ([] if contract else ["--no-contract"])
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    elapsed = time.monotonic() - started
    try:
        if done.returncode != 0:
            raise SystemExit(f"inferfleet up failed:\n{done.stderr}")
        doc = json.loads(done.stdout)
        assert doc["services"][0]["action"] == "started", doc
    finally:
        subprocess.run([*INFERFLEET, "down", "--file", str(fleet)], env=env, capture_output=True)
        wait_port_free(port)
    return elapsed


def summary(name: str, values: list[float]) -> str:
    med = statistics.median(values)
    spread = f"min {min(values):.3f}  max {max(values):.3f}"
    if len(values) >= 2:
        spread += f"  stdev {statistics.stdev(values):.3f}"
    return f"{name:<28} median {med:.3f} s   {spread}   (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="inferfleet-bench-"))
    env = {**os.environ, "INFERFLEET_STATE_DIR": str(work / "state")}
    port = free_port()
    data = yaml.safe_load(EXAMPLE.read_text())
    data["services"]["gemma"]["port"] = port
    fleet = work / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        # Warm-up: builds llama-server if needed, assembles and verifies the model once.
        print("warm-up: inferfleet up (builds/assembles on first use) ...", flush=True)
        inferfleet_run(fleet, port, env, contract=True)
        shown = subprocess.run(
            [*INFERFLEET, "show", "gemma", "--file", str(fleet), "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        argv = json.loads(shown.stdout)["argv"]
        bare, ours, ours_contract = [], [], []
        for i in range(args.runs):
            bare.append(bare_run(argv, port, work / "bare.log"))
            ours.append(inferfleet_run(fleet, port, env, contract=False))
            ours_contract.append(inferfleet_run(fleet, port, env, contract=True))
            print(
                f"run {i + 1}: bare {bare[-1]:.3f} s  up {ours[-1]:.3f} s  "
                f"up+contract {ours_contract[-1]:.3f} s",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(summary("bare llama-server", bare))
    print(summary("inferfleet up --no-contract", ours))
    print(summary("inferfleet up (+contract)", ours_contract))
    med_bare, med_ours = statistics.median(bare), statistics.median(ours)
    overhead = med_ours - med_bare
    print(f"ratio up/bare: {med_ours / med_bare:.2f}x   overhead: {overhead:+.3f} s")
    print(f"target (< 0.15 s overhead): {'met' if overhead < 0.15 else 'NOT met'}")
    record(
        "up_overhead",
        {
            "bare_s": med_bare,
            "up_s": med_ours,
            "up_contract_s": statistics.median(ours_contract),
            "overhead_s": overhead,
            "up_vs_bare": med_ours / med_bare,
        },
        rows=[
            Row("overhead_s", "overhead of up (up − bare)", "s", True, target=0.15),
            Row("up_s", "up --no-contract, time to healthy", "s", True, "bare_s", BARE),
            Row("up_contract_s", "up with the contract check", "s", True, "bare_s", BARE),
        ],
        notes={"runs": args.runs, "target": "overhead < 0.15 s"},
    )


if __name__ == "__main__":
    main()
