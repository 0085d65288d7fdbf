"""What does each hop of the front door add? Direct vs gateway vs Caddy + gateway.

One fleet, one run, the same prompts:

- direct:  the llama-server of the test model (`inferfleet up` starts it);
- gateway: the pinned LiteLLM proxy that `inferfleet up` deploys in front of it
           (`gateway:`), with its master key;
- caddy:   the pinned Caddy `inferfleet up` deploys for the fleet's `proxy:`
           (bearer auth, `tls internal`, `flush_interval -1`) in front of the
           gateway, with the same key (the gateway's master key is a proxy key).

Every request is a streamed completion of ``--max-tokens`` tokens
(``ignore_eos``) on a salted prompt (no arm profits from another's prompt cache,
L-52); arms alternate round by round in a rotating order so drift hits each alike.
Time to first token (first content event) and decode tokens/s (the tokens after
the first over the time after it) are read on the client. The added latency of a
hop is the difference of the medians: gateway - direct, caddy - gateway. Target
under 5 ms added per hop at the median on loopback.

Everything is started by `inferfleet up` and stopped by its recorded pids with
`inferfleet down` in a ``finally``. Loopback only.

    .venv/bin/python benchmarks/front_door.py [--rounds 10] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from results import Row, record

from inferfleet.client.stream import new_salt, request_body, stream, text_of
from inferfleet.install import caddy as caddy_tool

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "fleets" / "gateway.yaml"  # the model + a gateway
INFERFLEET = [sys.executable, "-m", "inferfleet"]
SERVICE = "gemma"
ARMS = ("direct", "gateway", "caddy")
PROMPT = "Write a short note about keeping a homelab's models in one git repository."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_fleet(folder: Path) -> tuple[Path, str, dict[str, int]]:
    """The fixture's model and gateway on free ports, one service, and a bearer proxy."""
    data: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    ports = {"service": free_port(), "gateway": free_port(), "proxy": free_port()}
    service = data["services"][SERVICE]
    service["port"] = ports["service"]
    data["services"] = {SERVICE: service}
    data["gateway"].pop("timeouts", None)
    data["gateway"]["port"] = ports["gateway"]
    key = f"sk-{secrets.token_hex(16)}"
    keys = folder / "gateway.env"
    keys.write_text(f"LITELLM_MASTER_KEY={key}\n")
    keys.chmod(0o600)
    data["proxy"] = {
        "host": "local",
        "bind": "127.0.0.1",
        "port": ports["proxy"],
        "exposure": {"level": "lan", "reason": "the benchmark's client on this machine"},
        "auth": "bearer",
        "keys_env": "gateway.env",
        "key_names": ["LITELLM_MASTER_KEY"],  # the gateway takes the key the proxy checks
        "tls": "internal",
    }
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, key, ports


def cli(*args: str, env: dict[str, str], timeout: float = 1800) -> None:
    done = subprocess.run(
        [*INFERFLEET, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"inferfleet {' '.join(args)} exited {done.returncode}:\n{done.stderr}")


def _handshake(port: int, root: Path) -> ssl.SSLContext | None:
    if not root.is_file():
        return None
    tls = ssl.create_default_context(cafile=str(root))
    with (
        contextlib.suppress(OSError),
        socket.create_connection(("127.0.0.1", port), 1) as raw,
        tls.wrap_socket(raw, server_hostname="127.0.0.1"),
    ):
        return tls
    return None


def caddy_trust(state: Path, port: int) -> ssl.SSLContext:
    """A client context trusting only the local CA of the Caddy `up` deployed (its data dir
    is ``<state>/proxy/data``), once a handshake with it succeeds."""
    root = caddy_tool.root_certificate(state / "proxy" / "data")
    deadline = time.monotonic() + 60
    while (tls := _handshake(port, root)) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"no TLS handshake with the deployed Caddy on port {port}")
        time.sleep(0.05)
    return tls


OVERHEAD_HEADER = "x-litellm-overhead-duration-ms"  # LiteLLM's own account of what it added


def one(client: httpx.Client, model: str, max_tokens: int) -> tuple[float, float, float | None]:
    """(time to first token in s, decode tokens/s, LiteLLM's reported overhead in ms or None)
    of one streamed completion."""
    body = request_body(
        "completions", model=model, text=f"{new_salt()} {PROMPT}", max_tokens=max_tokens
    )
    result = stream(client, "/v1/completions", body)
    if result.error:
        raise SystemExit(f"{client.base_url}: {result.error} {result.error_body[:300]}")
    stamps = [c.arrived_ns for c in result.chunks if text_of(c.data)[0]]
    if len(stamps) < 2:
        raise SystemExit(f"{client.base_url}: fewer than 2 content events")
    ttft = (stamps[0] - result.sent_ns) / 1e9
    decode = (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1e9)
    reported = result.headers.get(OVERHEAD_HEADER)
    try:
        overhead = None if reported is None else float(reported)
    except ValueError:
        overhead = None  # an answer's header is not trusted to be a number
    return ttft, decode, overhead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="front-door-") as tmp:
        folder = Path(tmp)
        fleet_file, key, ports = write_fleet(folder)
        env = os.environ | {"INFERFLEET_STATE_DIR": str(folder / "state")}
        try:
            cli("up", str(fleet_file), "--no-contract", env=env)  # service, gateway, Caddy
            tls = caddy_trust(folder / "state", ports["proxy"])
            auth = {"Authorization": f"Bearer {key}"}
            clients = {
                "direct": httpx.Client(base_url=f"http://127.0.0.1:{ports['service']}"),
                "gateway": httpx.Client(
                    base_url=f"http://127.0.0.1:{ports['gateway']}", headers=auth
                ),
                "caddy": httpx.Client(
                    base_url=f"https://127.0.0.1:{ports['proxy']}", headers=auth, verify=tls
                ),
            }
            model = "gemma3-270m"
            for arm in ARMS:  # warm-up: connections, the server's first batch
                one(clients[arm], model, args.max_tokens)
            ttft: dict[str, list[float]] = {a: [] for a in ARMS}
            decode: dict[str, list[float]] = {a: [] for a in ARMS}
            reported: list[float] = []
            for n in range(args.rounds):
                order = ARMS[n % 3 :] + ARMS[: n % 3]
                for arm in order:
                    first, rate, overhead = one(clients[arm], model, args.max_tokens)
                    ttft[arm].append(first)
                    decode[arm].append(rate)
                    if arm == "gateway" and overhead is not None:
                        reported.append(overhead)
            for c in clients.values():
                c.close()
        finally:
            with contextlib.suppress(SystemExit):
                cli("down", "--file", str(fleet_file), env=env, timeout=120)
    figures: dict[str, float] = {}
    for arm in ARMS:
        figures[f"ttft_ms_{arm}"] = statistics.median(ttft[arm]) * 1000
        figures[f"decode_tps_{arm}"] = statistics.median(decode[arm])
        spread = (max(ttft[arm]) - min(ttft[arm])) * 1000
        print(
            f"{arm:8} ttft median {figures[f'ttft_ms_{arm}']:7.1f} ms (spread {spread:.1f}), "
            f"decode {figures[f'decode_tps_{arm}']:6.1f} tok/s"
        )
    figures["added_ms_gateway"] = figures["ttft_ms_gateway"] - figures["ttft_ms_direct"]
    figures["added_ms_caddy"] = figures["ttft_ms_caddy"] - figures["ttft_ms_gateway"]
    if reported:
        figures["litellm_reported_ms"] = statistics.median(reported)
        print(f"LiteLLM's own {OVERHEAD_HEADER} median: {figures['litellm_reported_ms']:.1f} ms")
    print(
        f"added per hop at the median: gateway {figures['added_ms_gateway']:.1f} ms, "
        f"caddy {figures['added_ms_caddy']:.1f} ms (target < 5 ms each)"
    )
    rows = [
        Row("ttft_ms_gateway", "TTFT through the gateway", "ms", True, "ttft_ms_direct", "direct"),
        Row(
            "ttft_ms_caddy",
            "TTFT through Caddy + gateway",
            "ms",
            True,
            "ttft_ms_gateway",
            "gateway",
        ),  # fmt: skip
        Row("added_ms_gateway", "added by the gateway (LiteLLM)", "ms", True, target=5.0),
        Row("added_ms_caddy", "added by Caddy (TLS, bearer)", "ms", True, target=5.0),
        Row(
            "decode_tps_caddy",
            "decode through both hops",
            "tok/s",
            False,
            "decode_tps_direct",
            "direct",
        ),  # fmt: skip
    ]
    record(
        "front_door",
        figures,
        rows=rows,
        notes={"rounds": args.rounds, "max_tokens": args.max_tokens, "model": "gemma3-270m"},
    )


if __name__ == "__main__":
    main()
