"""What capacity costs: a swap member's cold load, and a model split over an RPC worker.

Same machine, same model (the embedded example's), same run:

- swap group (router mode): two members behind one
  llama-server router that holds one at a time, started by `inferfleet up`.
  Each round loads the member that is not loaded (its cold load, measured as
  `probe`/`bench` measure it: POST /models/load until GET /models says
  loaded) and then sends it a one-token request (a warm request). Ratio:
  cold load / warm request.
- RPC split (item 2): the pinned build's llama-server alone on the CPU, and
  the same server with half its layers on a `ggml-rpc-server` on loopback,
  split as `budget` splits it (--rpc, --device, --n-gpu-layers,
  --tensor-split). Decode tokens/s from the server's own timings
  (`timings.predicted_per_second`) on salted prompts, alternating arms.
  Ratio: split / local. On one machine the worker shares the cores and the
  network is loopback: the ratio is the protocol's cost, not a second
  host's gain.

Prints medians and ratios and records them with results.py.

    .venv/bin/python benchmarks/capacity.py [--runs 5] [--tokens 64]
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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml
from results import Row, record

from inferfleet.backends import health
from inferfleet.budget.rpc import Pool, rpc_split
from inferfleet.budget.shape import model_shape
from inferfleet.client.router import ensure_loaded
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.gguf.split import inspect
from inferfleet.install import llamacpp_build
from inferfleet.io import process
from inferfleet.runtimes.pinned import RPC_BINARY

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "local" / "fleet.yaml"
INFERFLEET = [sys.executable, "-m", "inferfleet"]
SMALL, BIG = "gemma-small", "gemma-big"
MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_fleet(work: Path, port: int) -> Path:
    """The embedded example as a swap group of two members, one loaded at a time."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    base = data["services"].pop("gemma")
    base.pop("alias")
    common = {**base, "port": port, "group": "swap"}
    data["services"] = {
        "small": {**common, "alias": SMALL, "ctx_per_slot": 2048, "parallel": 1},
        "big": {**common, "alias": BIG, "ctx_per_slot": 4096, "parallel": 2},
    }
    data["groups"] = {"swap": {"max_loaded": 1, "default": "small"}}
    path = work / "group" / "fleet.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def swap_rounds(runs: int, work: Path, env: dict[str, str]) -> tuple[list[float], list[float]]:
    port = free_port()
    fleet = group_fleet(work, port)
    up = subprocess.run(
        [*INFERFLEET, "up", str(fleet), "--json", "--no-contract"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if up.returncode != 0:
        raise SystemExit(f"inferfleet up of the swap group failed:\n{up.stderr}")
    base = f"http://127.0.0.1:{port}"
    cold, warm = [], []
    try:
        member = BIG
        with httpx.Client(timeout=300) as client:
            for i in range(runs):
                loaded = ensure_loaded(base, member)
                if loaded is None:
                    raise SystemExit(f"{member} was already loaded: the group did not swap")
                cold.append(loaded.seconds)
                started = time.monotonic()
                answer = client.post(
                    f"{base}/completion",
                    json={"model": member, "prompt": f"{uuid.uuid4()} Hello", "n_predict": 1},
                )
                answer.raise_for_status()
                warm.append(time.monotonic() - started)
                print(f"swap {i + 1}: cold load {cold[-1]:.3f} s  warm request {warm[-1]:.3f} s")
                member = SMALL if member == BIG else BIG
    finally:
        subprocess.run([*INFERFLEET, "down", "--file", str(fleet)], env=env, capture_output=True)
    return cold, warm


@contextmanager
def started(
    argv: list[str], log: Path, port: int | None, *, listen: int | None = None
) -> Iterator[None]:
    """A process of this benchmark, stopped by pid; ``port``: wait for its /health;
    ``listen``: wait until a socket listens on that port (an RPC worker: never a
    connection, it serves one client with a backlog of 1; llama-server dies when its
    ``--rpc`` worker is not there yet)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while listen is not None and health.listening(f"tcp://127.0.0.1:{listen}").state != "ok":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{Path(argv[0]).name} is not listening on {listen}; see {log}")
            time.sleep(0.05)
        while port is not None:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:]
                raise SystemExit(f"{Path(argv[0]).name} exited; the end of {log}:\n{tail}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{Path(argv[0]).name} not healthy after 300 s; see {log}")
            time.sleep(0.05)
        yield
    finally:
        if proc.poll() is None:  # one that exited was reaped by poll(): nothing to stop
            process.terminate(psutil.Process(proc.pid), grace=15)


def decode_rate(port: int, tokens: int) -> float:
    answer = httpx.post(
        f"http://127.0.0.1:{port}/completion",
        json={
            "prompt": f"{uuid.uuid4()} Once upon a time",
            "n_predict": tokens,
            "ignore_eos": True,
        },
        timeout=600,
    ).json()
    if answer.get("tokens_predicted") != tokens:
        raise SystemExit(
            f"the server predicted {answer.get('tokens_predicted')} tokens, not {tokens}"
        )
    return float(answer["timings"]["predicted_per_second"])


def split_rounds(
    runs: int, tokens: int, work: Path, model: str
) -> tuple[list[float], list[float], int]:
    source = load_fleet(EXAMPLE).fleet.runtimes["llama-cpp"].source
    assert source is not None
    done, _built = llamacpp_build.install(source)
    server = done.binary
    worker = str(Path(server).parent / RPC_BINARY)
    shape = model_shape(inspect(model))
    # Equal memory on both sides: the worker takes half the layers, as budget splits it.
    split = rpc_split(
        shape.n_layer,
        shape.tensors,
        host=Pool("cpu0", "CPU", 1024 * MIB, "host"),
        workers=[Pool("worker", "RPC0", 1024 * MIB, "rpc")],
        tied_output=shape.tied_output,
    )
    port, rpc_port = free_port(), free_port()
    common = [server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", "2048"]
    local_argv = [*common, "--device", "none", "--n-gpu-layers", "0"]
    split_argv = [
        *common,
        "--rpc",
        f"127.0.0.1:{rpc_port}",
        "--device",
        ",".join(split.devices),
        "--n-gpu-layers",
        str(split.n_gpu_layers),
        "--tensor-split",
        ",".join(f"{s:g}" for s in split.tensor_split),
    ]
    worker_argv = [worker, "--host", "127.0.0.1", "--port", str(rpc_port), "--device", "CPU"]
    local, over_rpc = [], []
    for i in range(runs):
        with started(local_argv, work / "local.log", port):
            local.append(decode_rate(port, tokens))
        with (
            started(worker_argv, work / "worker.log", None, listen=rpc_port),
            started(split_argv, work / "split.log", port),
        ):
            over_rpc.append(decode_rate(port, tokens))
        print(
            f"decode {i + 1}: local {local[-1]:.1f} tok/s  split over RPC {over_rpc[-1]:.1f} tok/s"
        )
    return local, over_rpc, split.layers[1]


def summary(name: str, values: list[float], unit: str) -> str:
    spread = f"min {min(values):.3f}  max {max(values):.3f}"
    return (
        f"{name:<28} median {statistics.median(values):.3f} {unit}   {spread}   (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    if args.runs < 1 or not 1 <= args.tokens <= 4096:
        raise SystemExit("--runs must be at least 1 and --tokens between 1 and 4096")

    work = Path(tempfile.mkdtemp(prefix="inferfleet-capacity-"))
    env = {**os.environ, "INFERFLEET_STATE_DIR": str(work / "state")}
    try:
        shown = subprocess.run(
            [*INFERFLEET, "up", str(EXAMPLE), "--json", "--no-contract"],
            capture_output=True,
            text=True,
            env={**env, "INFERFLEET_STATE_DIR": str(work / "warmup")},
            check=False,
        )  # builds llama.cpp and assembles the model on first use
        subprocess.run(
            [*INFERFLEET, "down", "--file", str(EXAMPLE)],
            env={**env, "INFERFLEET_STATE_DIR": str(work / "warmup")},
            capture_output=True,
        )
        if shown.returncode != 0:
            raise SystemExit(f"inferfleet up of the example failed:\n{shown.stderr}")
        argv = json.loads(
            subprocess.run(
                [*INFERFLEET, "show", "gemma", "--file", str(EXAMPLE), "--json"],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            ).stdout
        )["argv"]
        model = argv[argv.index("--model") + 1]
        cold, warm = swap_rounds(args.runs, work, env)
        local, over_rpc, worker_layers = split_rounds(args.runs, args.tokens, work, model)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(summary("swap member cold load", cold, "s"))
    print(summary("warm request (1 token)", warm, "s"))
    print(summary("decode, local", local, "tok/s"))
    print(summary("decode, split over RPC", over_rpc, "tok/s"))
    med = {k: statistics.median(v) for k, v in
           {"cold": cold, "warm": warm, "local": local, "rpc": over_rpc}.items()}  # fmt: skip
    print(f"ratio cold load / warm request: {med['cold'] / med['warm']:.1f}x")
    print(f"ratio decode split / local: {med['rpc'] / med['local']:.2f}x "
          f"({worker_layers} layer slots on the worker)")  # fmt: skip
    record(
        "capacity",
        {
            "cold_load_s": med["cold"],
            "warm_request_s": med["warm"],
            "cold_vs_warm": med["cold"] / med["warm"],
            "decode_local_tps": med["local"],
            "decode_rpc_tps": med["rpc"],
            "rpc_vs_local": med["rpc"] / med["local"],
        },
        rows=[
            Row(
                "cold_load_s", "swap member cold load", "s", True, "warm_request_s", "warm request"
            ),
            Row(
                "decode_rpc_tps",
                "decode split over RPC",
                "tok/s",
                False,
                "decode_local_tps",
                "local",
            ),
        ],  # fmt: skip
        notes={"runs": args.runs, "tokens": args.tokens, "worker_layer_slots": worker_layers},
    )


if __name__ == "__main__":
    main()
