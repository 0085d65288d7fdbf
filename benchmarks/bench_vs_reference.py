"""inferfleet's bench against an established client, on the same server, in the same run.

The reference is NVIDIA's AIPerf (PyPI ``aiperf==0.13.0``, Apache-2.0, pure
Python, no GPU needed). It runs in its own virtual environment under the
cache dir (its pins, e.g. ``rich~=14.1``, clash with inferfleet's) and is
installed there on first use. Offline it needs two things: a local
tokenizer directory (it loads one even with ``--use-server-token-count``;
a one-entry word-level tokenizer is written for it and never used for
counts) and ``HF_HUB_OFFLINE`` left unset (in offline mode it ignores local
paths).

One llama-server (the embedded example with 8 slots) serves both clients.
Both send the same battery prompts, salted, 128+ tokens with ``ignore_eos``,
streamed with usage, at concurrency 1 and 8; each is warmed up by this
script (one unmeasured request) so the server log window holds only
measured requests. Each level runs ``--rounds`` times, the clients' order
flipping each round (ABBA): on a shared 2-core host one round per client
compares two moments of the host, not two clients (docs/bench/vs-aiperf.md).
For each client, level and round it reports:

- the client's own numbers: TTFT, per-stream decode rate, aggregate rate;
- the server's truth for the same requests, parsed from llama-server's log
  ("prompt eval time" / "eval time" lines), and how far each client is off;
- client overhead: CPU seconds of the client's whole process tree per
  request (it competes with the server for the same cores) and wall time;
- from the server's timestamped log: the slots used, how far apart the
  requests started on them, and the decode-only aggregate rate (L-53);
- the share of host CPU that was neither client nor server (contention).

    .venv/bin/python benchmarks/bench_vs_reference.py [--out DIR] [--prompts 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from results import Row, record

from inferfleet import paths
from inferfleet.bench.arms import ArmSpec, StartSpec, started
from inferfleet.bench.battery import load_battery, new_salt
from inferfleet.bench.runner import Endpoint, request_extra, warm_up
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.fleetfile.loader import load_fleet

AIPERF = "aiperf==0.13.0"
LEVELS = (1, 8)
SLOTS = 8
# Runs the CLI whether or not app.py registers `bench` yet.
INFERFLEET_BENCH = (
    "import sys; from inferfleet.cli import bench_cmd; from inferfleet.cli.app import app, main; "
    "names = {c.name for c in app.registered_commands}; "
    "'bench' in names or bench_cmd.register(app); sys.argv[0] = 'inferfleet'; main()"
)
LOG_LINE = re.compile(
    r"(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens"
    r".*?(?P<tps>[\d.]+) tokens per second"
)
# With --log-timestamps every line starts with minutes.seconds.ms.us since the server started.
STAMP = r"^(?P<m>\d+)\.(?P<s>\d+)\.(?P<ms>\d+)\.(?P<us>\d+) "
LAUNCH = re.compile(STAMP + r".*launch_slot_: id +(?P<slot>\d+) \| task (?P<task>\d+)", re.M)
RELEASE = re.compile(STAMP + r".*release: id +(?P<slot>\d+) \| task (?P<task>\d+)", re.M)


def ensure_aiperf() -> tuple[Path, Path]:
    """The reference client's binary and a local tokenizer dir, installed once."""
    home = paths.cache_dir() / "bench-ref" / AIPERF.replace("==", "-")
    binary = home / "bin" / "aiperf"
    if not binary.exists():
        print(f"installing {AIPERF} into {home} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run(
            [str(home / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", AIPERF],
            check=True,
        )
    tokenizer = home / "local-tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        tokenizer.mkdir(parents=True, exist_ok=True)
        script = (
            "import json, sys; from tokenizers import Tokenizer, models, pre_tokenizers; "
            "t = Tokenizer(models.WordLevel({'[UNK]': 0}, unk_token='[UNK]')); "
            "t.pre_tokenizer = pre_tokenizers.Whitespace(); "
            "t.save(sys.argv[1] + '/tokenizer.json'); "
            "json.dump({'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]', "
            "'model_max_length': 10**6}, open(sys.argv[1] + '/tokenizer_config.json', 'w'))"
        )
        subprocess.run([str(home / "bin" / "python"), "-c", script, str(tokenizer)], check=True)
    return binary, tokenizer


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run a client to completion; its wall time and its process tree's CPU seconds."""
    cpu0, wall0 = children_cpu(), time.monotonic()
    with log.open("w") as handle:
        done = subprocess.run(argv, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    wall, cpu = time.monotonic() - wall0, children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}); see {log}")
    return wall, cpu


def settled_size(log: Path, *, quiet_s: float = 0.5, limit_s: float = 10.0) -> int:
    """The log's size once the server stopped writing: its lines lag the answers."""
    size, deadline = log.stat().st_size, time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = log.stat().st_size
        if now == size:
            break
        size = now
    return size


def _seconds(match: re.Match[str]) -> float:
    return int(match["m"]) * 60 + int(match["s"]) + int(match["ms"]) / 1e3 + int(match["us"]) / 1e6


def decode_only_rate(spans: list[tuple[float, float, int]]) -> float | None:
    """Tokens decoded per second while at least one request was decoding (L-53).

    ``spans``: (decode start, decode end, tokens decoded) per request.
    """
    busy, end, tokens = 0.0, float("-inf"), 0
    for first, last, count in sorted(spans):
        tokens += count
        if last > end:
            busy += last - max(first, end)
            end = last
    return round(tokens / busy, 3) if busy > 0 and tokens else None


def server_truth(log: Path, start: int) -> dict[str, Any]:
    """Per-request figures llama-server logged after byte ``start``.

    Prompt and decode timings per request; from the timestamped slot lines,
    which slots served the requests, how far apart they started on their
    slots, and the decode-only aggregate rate the server delivered.
    """
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read().decode("utf-8", "replace")
    prompt_ms, decode_tps, decode_ms, decode_n = [], [], [], []
    for match in LOG_LINE.finditer(text):
        if match["kind"] == "prompt eval":
            prompt_ms.append(float(match["ms"]))
        else:
            decode_tps.append(float(match["tps"]))
            decode_ms.append(float(match["ms"]))
            decode_n.append(int(match["n"]))
    launches = [(_seconds(m), m["slot"]) for m in LAUNCH.finditer(text)]
    releases = [_seconds(m) for m in RELEASE.finditer(text)]
    # A slot is released right after its timing lines: the decode ran over the eval time before.
    spans = [
        (done - ms / 1e3, done, n)
        for done, ms, n in zip(releases, decode_ms, decode_n, strict=False)
    ]
    return {
        "slots_used": len({slot for _, slot in launches}),
        "slot_start_spread_s": (
            round(max(t for t, _ in launches) - min(t for t, _ in launches), 3)
            if launches
            else None
        ),
        "decode_only_aggregate_tps": decode_only_rate(spans),
        "requests": len(decode_tps),
        "decode_tps_median": statistics.median(decode_tps) if decode_tps else None,
        "prompt_ms_median": statistics.median(prompt_ms) if prompt_ms else None,
        "busy_ms_median": (
            statistics.median(p + d for p, d in zip(prompt_ms, decode_ms, strict=False))
            if decode_ms
            else None
        ),
    }


def run_inferfleet(
    url: str, level: int, prompts: int, max_tokens: int, out: Path
) -> tuple[dict[str, Any], float, float]:
    folder = out / f"inferfleet-c{level}"
    argv = [sys.executable, "-c", INFERFLEET_BENCH, "bench", url, "--api", "completions"]
    argv += ["--prompts", str(prompts), "--concurrency", str(level), "--runs", "1"]
    argv += ["--max-tokens", str(max_tokens), "--no-warmup", "--out", str(folder), "--json"]
    wall, cpu = timed(argv, dict(os.environ), out / f"inferfleet-c{level}.log")
    return read_inferfleet(folder), wall, cpu


def read_inferfleet(folder: Path) -> dict[str, Any]:
    summary = json.loads((folder / "summary.json").read_text())
    (lv,) = summary["levels"]
    return {
        "requests": lv["ok"],
        "errors": lv["requests"] - lv["ok"],
        "resent": lv["retries"],  # stale keep-alive connections, resent before any byte
        "ttft_ms_median": lv["ttft_ms"]["median"],
        "decode_tps_median": lv["decode_tps"]["median"],
        "aggregate_tps": lv["aggregate_tps"]["median"],
        "e2e_ms_median": lv["e2e_ms"]["median"],
        "cached_tokens_max": lv["cache"]["max_cached_tokens"],
    }


def run_aiperf(
    binary: Path,
    tokenizer: Path,
    url: str,
    model: str,
    texts: list[str],
    level: int,
    max_tokens: int,
    extra: dict[str, Any],
    out: Path,
) -> tuple[dict[str, Any], float, float]:
    folder = out / f"aiperf-c{level}"
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    argv = [str(binary), "profile", "--model", model, "--tokenizer", str(tokenizer), "--url", url]
    argv += ["--endpoint-type", "completions", "--streaming", "--use-server-token-count"]
    argv += ["--input-file", str(dataset), "--custom-dataset-type", "single_turn"]
    argv += ["--dataset-sampling-strategy", "sequential", "--request-count", str(len(texts))]
    argv += ["--concurrency", str(level), "--osl", str(max_tokens), "--use-legacy-max-tokens"]
    argv += ["--extra-inputs", json.dumps({"ignore_eos": True, **extra})]
    argv += ["--artifact-dir", str(folder / "artifacts"), "--ui-type", "none"]
    argv += ["--no-server-metrics"]
    env = {k: v for k, v in os.environ.items() if k not in {"HF_HUB_OFFLINE"}}
    wall, cpu = timed(argv, env, out / f"aiperf-c{level}.log")
    return read_aiperf(folder), wall, cpu


def read_aiperf(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / "artifacts" / "profile_export_aiperf.json").read_text())
    return {
        "requests": int(data["request_count"]["avg"]),
        "errors": sum(int(e.get("count", 0)) for e in data.get("error_summary") or []),
        "resent": 0,  # aiperf does not resend; a dropped keep-alive connection is an error
        "ttft_ms_median": data["time_to_first_token"]["p50"],
        "decode_tps_median": data["output_token_throughput_per_user"]["p50"],
        "aggregate_tps": data["output_token_throughput"]["avg"],
        "e2e_ms_median": data["request_latency"]["p50"],
        "cached_tokens_max": data.get("usage_prompt_cache_read_tokens", {}).get("max"),
    }


def pct(value: float | None, truth: float | None) -> str:
    if value is None or not truth:
        return "-"
    return f"{(value - truth) / truth * 100:+.1f}%"


def host_busy_s() -> float:
    """CPU seconds all cores spent on anything but idling, since boot."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def process_cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def median_of(rows: list[dict[str, Any]], key: str, sub: str | None = None) -> float | None:
    values = [(r[sub] if sub else r)[key] for r in rows]
    present = [float(v) for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "vs-reference")
    parser.add_argument("--prompts", type=int, default=4, help="requests at concurrency 1")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternating rounds per level (order flips)"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    binary, tokenizer = ensure_aiperf()
    battery = load_battery()

    fleet = args.out / "fleet.yaml"
    data = yaml.safe_load(embedded_example().read_text())
    data["services"]["gemma"]["port"] = 1  # the arm picks a free port itself
    # Timestamped log lines: when each request reached a slot, and when it was released.
    data["services"]["gemma"]["extra_args"] = ["--log-timestamps"]
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = ArmSpec(name="server", start=StartSpec(service="gemma", set={"parallel": SLOTS}))
    results: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with started(load_fleet(fleet), spec, print, memory_slack=512 << 20) as run:
        assert run.server is not None and run.target.model is not None
        url, model, log = run.target.base_url, run.target.model, Path(run.server.log)
        endpoint = Endpoint("server", url, model, "completions", "llama.cpp")
        # The same server work for both clients: whole prompts (no cache reuse). inferfleet
        # also asks for llama.cpp's prompt-start event, which only splits its own timing;
        # aiperf would take that empty event for a first token, so it is not sent there.
        extra = {k: v for k, v in request_extra("llama.cpp").items() if k == "cache_prompt"}
        for level in LEVELS:
            count = max(args.prompts, level) if level == 1 else level
            prompts = [battery.prompts[i % len(battery.prompts)] for i in range(count)]
            for round_no in range(1, args.rounds + 1):
                # ABBA: neither client always runs first, after the other's leftovers.
                order = ("inferfleet", "aiperf") if round_no % 2 else ("aiperf", "inferfleet")
                out = args.out / f"round{round_no}"
                out.mkdir(exist_ok=True)
                for client in order:
                    warm_up(endpoint, prompts[0], timeout_s=600)
                    start = settled_size(log)  # the warm-up's own lines stay out
                    print(f"c={level} round {round_no}: {client}, {count} requests", flush=True)
                    busy0, server0 = host_busy_s(), process_cpu_s(run.server.pid)
                    if client == "inferfleet":
                        numbers, wall, cpu = run_inferfleet(url, level, count, args.max_tokens, out)
                    else:
                        texts = [p.salted(new_salt()) for p in prompts]
                        numbers, wall, cpu = run_aiperf(
                            binary,
                            tokenizer,
                            url,
                            model,
                            texts,
                            level,
                            args.max_tokens,
                            extra,
                            out,
                        )
                    server_cpu = process_cpu_s(run.server.pid) - server0
                    others = max(0.0, host_busy_s() - busy0 - server_cpu - cpu)
                    truth = server_truth(log, start)
                    results.append(
                        {
                            "client": client,
                            "concurrency": level,
                            "round": round_no,
                            **numbers,
                            "server": truth,
                            "wall_s": round(wall, 2),
                            "cpu_s": round(cpu, 2),
                            "cpu_ms_per_request": round(cpu / max(1, numbers["requests"]) * 1e3, 1),
                            "cpu_pct_of_one_core": round(cpu / wall * 100, 1) if wall else None,
                            "server_cpu_s": round(server_cpu, 2),
                            # Neither client nor server: other work on the same cores, which
                            # stalls llama.cpp's threads (decode far more than prefill).
                            "other_cpu_pct": round(others / wall * 100, 1) if wall else None,
                            "latency_overhead_ms": (
                                round(numbers["e2e_ms_median"] - truth["busy_ms_median"], 1)
                                if truth["busy_ms_median"] is not None
                                else None
                            ),
                        }
                    )
    report = {
        "reference": AIPERF,
        "server": {"slots": SLOTS, "max_tokens": args.max_tokens, "argv": run.server.argv},
        "rounds": args.rounds,
        "host": {
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "memory_back": run.server.memory_back,
        "results": results,
    }
    (args.out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"Reference: {AIPERF}. One llama-server ({SLOTS} slots), {args.max_tokens} tokens per "
        "request, the same salted battery prompts and request fields; each level runs "
        f"{args.rounds} round(s), the clients' order flipping each round. The server's own "
        "per-request log lines are the truth column. Client CPU is the whole process tree's "
        "(user + system), start-up included; it competes with the server for the same cores, "
        "and so does `other CPU`: work on the host that is neither client nor server.",
        "",
        "| client | conc. | round | ok | errors | resent | TTFT ms (p50) | "
        "decode tok/s per stream (p50) | server's decode (p50) | client vs server | "
        "server's decode-only aggregate tok/s | aggregate tok/s | slots used | "
        "slot start spread s | client CPU s | CPU ms/request | CPU % of a core | "
        "other CPU % | e2e - server busy ms (p50) | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        server = r["server"]["decode_tps_median"]
        off = pct(r["decode_tps_median"], server)
        lines.append(
            f"| {r['client']} | {r['concurrency']} | {r['round']} | {r['requests']} | "
            f"{r['errors']} | {r['resent']} | {r['ttft_ms_median']:.0f} | "
            f"{r['decode_tps_median']:.2f} | {server:.2f} | {off} | "
            f"{r['server']['decode_only_aggregate_tps']} | {r['aggregate_tps']:.2f} | "
            f"{r['server']['slots_used']} | {r['server']['slot_start_spread_s']} | "
            f"{r['cpu_s']:.1f} | {r['cpu_ms_per_request']:.0f} | "
            f"{r['cpu_pct_of_one_core']} | {r['other_cpu_pct']} | "
            f"{r['latency_overhead_ms']} | {r['wall_s']:.1f} |"
        )
    rows_of = {
        (c, lv): [r for r in results if r["client"] == c and r["concurrency"] == lv]
        for c in ("inferfleet", "aiperf")
        for lv in LEVELS
    }
    for level in LEVELS:
        a = median_of(rows_of[("inferfleet", level)], "cpu_ms_per_request")
        b = median_of(rows_of[("aiperf", level)], "cpu_ms_per_request")
        ratio = b / a if a and b else 0
        lines.append(f"\nc={level}: client CPU per request, aiperf / inferfleet = {ratio:.1f}x")
    lines.append(
        "\n`e2e - server busy` is the client's median request latency minus the server's median "
        "prompt + decode time: at concurrency 1 it is the client's and the wire's share; at "
        "higher concurrency it also holds the time a request waits inside the server before "
        "its prompt is scheduled. `server's decode-only aggregate` is the tokens the server "
        "decoded over the time at least one request was decoding (prefill left out, L-53); "
        "`slot start spread` is the time between the first and the last request starting on a "
        "slot: llama.cpp takes new requests only between batches, so requests sent together "
        "can start seconds apart when a long prompt's batch is running."
    )
    load = ", ".join(f"{x:.2f}" for x in load_before)
    lines.append(f"\nHost: {os.cpu_count()} CPUs, load average before the run: {load}.")
    text = "\n".join(lines) + "\n"
    (args.out / "comparison.md").write_text(text)
    print(text)
    print(f"load average before {load_before}, after {os.getloadavg()}; results in {args.out}")
    figures: dict[str, float] = {}
    rows: list[Row] = []
    for level in LEVELS:
        ours, theirs = rows_of[("inferfleet", level)], rows_of[("aiperf", level)]
        # Medians over the rounds: one round is one sample of a noisy shared host.
        pairs = {
            f"cpu_ms_per_request_c{level}": median_of(ours, "cpu_ms_per_request"),
            f"aiperf_cpu_ms_per_request_c{level}": median_of(theirs, "cpu_ms_per_request"),
            f"decode_tps_c{level}": median_of(ours, "decode_tps_median"),
            f"server_decode_tps_c{level}": median_of(ours, "decode_tps_median", "server"),
            f"aiperf_decode_tps_c{level}": median_of(theirs, "decode_tps_median"),
            f"aiperf_server_decode_tps_c{level}": median_of(theirs, "decode_tps_median", "server"),
            f"server_decode_only_aggregate_tps_c{level}": median_of(
                ours, "decode_only_aggregate_tps", "server"
            ),
            f"aiperf_server_decode_only_aggregate_tps_c{level}": median_of(
                theirs, "decode_only_aggregate_tps", "server"
            ),
        }
        figures.update({k: v for k, v in pairs.items() if v is not None})
        rows += [
            Row(f"cpu_ms_per_request_c{level}", f"client CPU per request, c={level}", "ms",
                True, f"aiperf_cpu_ms_per_request_c{level}", AIPERF),
            Row(f"decode_tps_c{level}", f"decode rate per stream, c={level}", "tok/s", False,
                f"server_decode_tps_c{level}", "the server's own log"),
            Row(f"aiperf_decode_tps_c{level}", f"{AIPERF} decode rate, c={level}", "tok/s",
                False, f"aiperf_server_decode_tps_c{level}", "the server's own log"),
            Row(f"server_decode_only_aggregate_tps_c{level}",
                f"server's decode-only aggregate for inferfleet, c={level}", "tok/s", False,
                f"aiperf_server_decode_only_aggregate_tps_c{level}", f"the same for {AIPERF}"),
        ]  # fmt: skip
    record(
        "bench_vs_reference",
        figures,
        rows=rows,
        notes={
            "slots": SLOTS,
            "max_tokens": args.max_tokens,
            "prompts": args.prompts,
            "rounds": args.rounds,
        },
    )


if __name__ == "__main__":
    main()
