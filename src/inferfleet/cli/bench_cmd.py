"""`inferfleet bench SERVICE|URL`: honest numbers, written to a results folder.

Exit status 0 when every request succeeded, 1 when some failed or the run
stopped early (the results are still written), 2 for bad arguments (nothing
is measured and nothing is written), 130 after Ctrl-C (what finished before it
is written). ``--json`` prints the summary (``inferfleet.bench/v1``).

The default is a quick look (about a minute on the embedded example: two levels,
two runs, four prompts, 128 tokens); ``--thorough`` measures every prompt at
three levels, three runs, 256 tokens. Results land in the state folder's
``bench/`` unless ``--out`` says otherwise, where ``status`` and the board read them.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import typer

from inferfleet.bench import outputs, plots
from inferfleet.bench.arms import load_arms
from inferfleet.bench.battery import load_battery
from inferfleet.bench.campaign import DEFAULT_MEMORY_SLACK, Options, PlannedArm, run_bench
from inferfleet.bench.measure import MIN_DECODE_TOKENS, RequestRecord
from inferfleet.bench.replay import load_replay
from inferfleet.bench.runner import Load
from inferfleet.bench.summary import summarise
from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, KeyEnvOpt, key_from_env, resolve_fleet
from inferfleet.client.target import Target, from_service, from_url, resolve
from inferfleet.documents import BenchDocument
from inferfleet.errors import EXIT_FAILED, EXIT_INTERRUPTED, UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.fleetfile.quantities import format_size, parse_size
from inferfleet.output import Output, esc
from inferfleet.paths import state_dir


@dataclass(frozen=True)
class Depth:
    """What a bench measures unless told otherwise."""

    concurrency: str
    runs: int
    prompts: int | None  # None: the whole battery
    max_tokens: int


QUICK = Depth("1,4", 2, 4, MIN_DECODE_TOKENS)  # 1 and the service's slots where declared
THOROUGH = Depth("1,2,4", 3, None, 256)


def parse_levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(
            f"--concurrency {text!r} is not a list of whole numbers",
            hint="e.g. --concurrency 1,2,4",
        ) from None
    if not levels or any(c < 1 for c in levels):
        raise UsageError("concurrency levels must be at least 1", hint="e.g. --concurrency 1,2,4")
    return tuple(sorted(set(levels)))


def bench(
    target: str | None = typer.Argument(
        None, help="A service of the fleet file, or a base URL (optional with --arms)."
    ),
    arms_file: Path | None = typer.Option(
        None, "--arms", help="YAML file of arms: running services, URLs or servers to start."
    ),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        "-c",
        help="Levels, e.g. 1,2,4 (default 1 and the service's slots, else 1,4; --thorough 1,2,4).",
    ),
    runs: int | None = typer.Option(
        None, "--runs", help="Runs per level, 2+ for verdicts (default 2; --thorough 3)."
    ),
    thorough: bool = typer.Option(
        False,
        "--thorough",
        help="Every prompt, levels 1,2,4, three runs, 256 tokens (default: a quick look).",
    ),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="Results folder (new or empty); default the state folder's bench/<time>, "
        "where status reads it.",
    ),
    api: str = typer.Option("chat", "--api", help="chat or completions (base models)."),
    max_tokens: int | None = typer.Option(
        None,
        "--max-tokens",
        help=f"Tokens generated per request, at least {MIN_DECODE_TOKENS} (default "
        f"{QUICK.max_tokens}; --thorough {THOROUGH.max_tokens}).",
    ),
    prompts: int | None = typer.Option(
        None, "--prompts", help="Use the first N prompts only (default 4; --thorough all)."
    ),
    prompt_ids: str | None = typer.Option(None, "--prompt-ids", help="Comma-separated ids."),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        help="JSONL of chat requests (a client's bodies, LiteLLM's logging payloads) "
        "replayed instead of the battery, all of them unless --prompts; each keeps its "
        "max_tokens up to --max-tokens.",
    ),
    ignore_eos: bool | None = typer.Option(
        None,
        "--ignore-eos/--no-ignore-eos",
        help="Ask the server to generate every token. Default: on for one endpoint, off for "
        "an A/B of several arms (a drafter is measured on text the model would write, L-48).",
    ),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds one request may take."),
    memory_slack: str = typer.Option(
        format_size(DEFAULT_MEMORY_SLACK),
        "--memory-slack",
        help="Available memory that may stay missing after a started arm stops.",
    ),
    warmup: bool = typer.Option(True, "--warmup/--no-warmup", help="One unmeasured request."),
    share_device: bool = typer.Option(
        False,
        "--share-device",
        help="Start arms even while another service of the fleet runs on their device (L-52).",
    ),
    key_env: str | None = KeyEnvOpt,
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Benchmark endpoints on real, salted prompts with the server's own token counts."""
    out = Output(json_mode=json_out)
    depth = THOROUGH if thorough else QUICK
    levels_given = concurrency is not None
    concurrency = concurrency or depth.concurrency
    runs = depth.runs if runs is None else runs
    max_tokens = depth.max_tokens if max_tokens is None else max_tokens
    if prompts is None and prompt_ids is None and replay is None:
        prompts = depth.prompts
    if api not in ("chat", "completions"):
        raise UsageError(f"--api {api!r} is not chat or completions", hint="e.g. --api chat")
    if max_tokens < MIN_DECODE_TOKENS:
        raise UsageError(
            f"--max-tokens {max_tokens} is below {MIN_DECODE_TOKENS}: the inter-token figure "
            "would be first-token noise (L-49)",
            hint=f"use --max-tokens {MIN_DECODE_TOKENS} or more",
        )
    try:
        slack = parse_size(memory_slack)
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. --memory-slack 512MiB") from None
    if target is None and arms_file is None:
        raise UsageError(
            "name a SERVICE or URL, or give --arms FILE", hint="inferfleet bench gemma"
        )
    battery = load_battery() if replay is None else load_replay(replay)
    ids = [p.strip() for p in prompt_ids.split(",") if p.strip()] if prompt_ids else None
    chosen = battery.select(ids, prompts)
    options = Options(
        concurrency=parse_levels(concurrency),
        runs=runs,
        api="chat" if api == "chat" else "completions",
        prompts=tuple(chosen),
        battery=battery,
        load=Load(max_tokens=max_tokens, ignore_eos=bool(ignore_eos), timeout_s=timeout),
        memory_slack=slack,
        warmup=warmup,
        share_device=share_device,
    )
    options.validate()
    out_path = out_dir or _fresh_results_dir()
    outputs.check_out_dir(out_path)

    cache: dict[str, LoadedFleet] = {}

    def fleet(path: Path | None) -> LoadedFleet:
        if "fleet" not in cache:
            cache["fleet"] = resolve_fleet(path, out, last_up=True)
        return cache["fleet"]

    arms: list[PlannedArm] = []
    if target is not None:
        resolved = resolve(target, file, fleet)
        if key_env is not None:
            resolved = replace(resolved, key=key_from_env(key_env))
        arms.append(PlannedArm(resolved.label, target=resolved))
    if arms_file is not None:
        for spec in load_arms(arms_file):
            if spec.start is not None:
                arms.append(PlannedArm(spec.name, start=spec))
            elif spec.url is not None:
                arms.append(PlannedArm(spec.name, target=_named(from_url(spec.url), spec.name)))
            else:
                assert spec.service is not None
                found = from_service(fleet(file), spec.service)
                arms.append(PlannedArm(spec.name, target=_named(found, spec.name, spec.model)))
    loaded = cache.get("fleet")
    if loaded is None and any(a.start is not None for a in arms):
        loaded = fleet(file)
    if loaded is not None:
        _refuse_unreachable(loaded, arms)

    bars = _Bars(out)

    def progress(rec: RequestRecord) -> None:
        bars.advance()
        if not rec.ok:
            out.note(f"  [red]request failed[/red] {esc(rec.prompt_id)}: {esc(rec.error)}")

    if not levels_given and not thorough:
        # The quick look's second level is the service's slots where it declares them: more
        # streams than slots only queue, fewer leave slots idle.
        slots = {a.target.parallel for a in arms if a.target is not None and a.target.parallel}
        if len(slots) == 1 and (only := slots.pop()) > 1:
            options = replace(options, concurrency=(1, only))
    if ignore_eos is None:
        # L-48: an A/B lets the model stop where it would; past its end of text a drafter is
        # measured on text the model would not write. One endpoint's rates take every token;
        # replayed traffic ends where the model ends it, as it did in production.
        every_token = len(arms) < 2 and replay is None
        options = replace(options, load=replace(options.load, ignore_eos=every_token))
    with bars:
        result = run_bench(
            arms,
            options,
            loaded=loaded,
            note=lambda text: out.note(esc(text)),
            on_record=progress,
            on_level=bars.level if bars.live else None,
        )
    summary = summarise(result)
    written = outputs.write(out_path, summary, result.records)
    failed = [r for r in result.records if not r.ok]
    if json_out:
        out.emit(summary)
    else:
        _show(out, summary, written)
    if result.records and not any(p.parent.name == "plots" for p in written):
        out.note(esc(plots.SKIPPED))
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if failed or result.aborted:
        raise typer.Exit(EXIT_FAILED)


def _fresh_results_dir() -> Path:
    """The state folder's ``bench/<time>``; a second bench in the same second gets
    ``<time>-2`` (results of different runs are never mixed)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    folder = state_dir() / "bench"
    candidate, number = folder / stamp, 2
    while candidate.exists():
        candidate, number = folder / f"{stamp}-{number}", number + 1
    return candidate


class _Bars:
    """A progress bar per level on a terminal's stderr (a pipe or --json gets the notes)."""

    def __init__(self, out: Output) -> None:
        self.live = out.human and sys.stderr.isatty()
        self._progress: Any = None
        self._task: Any = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._progress = Progress(
                "{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=out.err,
            )

    def __enter__(self) -> _Bars:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def level(self, arm: str, run: int, concurrency: int, requests: int) -> None:
        self._task = self._progress.add_task(
            esc(f"{arm}: run {run}, concurrency {concurrency}"), total=requests
        )

    def advance(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)


def _refuse_unreachable(loaded: LoadedFleet, arms: list[PlannedArm]) -> None:
    """A service only its host can reach is not benchmarked at this machine's own loopback
    (a stranger there would be measured, L-33), nor through a tunnel (measured with it)."""
    from inferfleet.fleetfile.groups import unit_service
    from inferfleet.render.endpoints import judged_on_host

    fleet = loaded.fleet
    for arm in arms:
        if arm.target is None or arm.target.service is None:
            continue
        service = unit_service(fleet, arm.target.service)
        if judged_on_host(fleet, service):
            raise UsageError(
                f"service {arm.target.service!r} listens on {service.bind}:{service.port} of host "
                f"{service.host}, which is not reachable from here",
                where=f"arm {arm.name}",
                hint=f"run the bench on the host (ssh to {service.host}, then `inferfleet bench "
                f"{arm.target.service}`), or give the URL of a route you trust",
            )


def _named(target: Target, name: str, model: str | None = None) -> Target:
    return replace(target, label=name, model=model or target.model)


def _show(out: Output, summary: BenchDocument, written: list[Path]) -> None:
    levels = summary["levels"]
    assert isinstance(levels, list)
    rows = []
    for lv in levels:
        rows.append(
            [
                esc(lv["arm"]),
                str(lv["concurrency"]),
                f"{lv['ok']}/{lv['requests']}",
                _fmt(lv["decode_tps"]),
                _fmt(lv["aggregate_tps"]),
                _fmt(lv["ttft_ms"], 0),
                _fmt(lv["prefill_tps"]),
                str(lv["cache"]["max_cached_tokens"] if lv["cache"]["reported"] else "-"),
            ]
        )
    out.table(
        "bench (median, p10-p90)",
        [
            "arm",
            "conc.",
            "ok",
            "decode tok/s per stream",
            "aggregate tok/s",
            "TTFT ms",
            "prefill tok/s",
            "max cached",
        ],
        rows,
    )
    for lv in levels:
        draft = lv.get("draft")
        if draft and draft["acceptance"] is not None:
            out.line(
                f"{esc(lv['arm'])} c={lv['concurrency']}: the drafter's tokens accepted "
                f"{draft['accepted']}/{draft['proposed']} ({draft['acceptance']:.0%}; L-48)"
            )
    for arm in summary["arms"]:
        if arm.get("cold_load_s") is not None:
            out.line(
                f"{esc(arm['name'])}: cold load of {esc(arm['model'] or '')} "
                f"{arm['cold_load_s']:.2f} s (a swap group member; not in TTFT)"
            )
    comparisons = summary["comparisons"]
    assert isinstance(comparisons, list)
    for c in comparisons:
        diff = "-" if c["diff_pct"] is None else f"{c['diff_pct']:+.1f}%"
        out.line(
            f"c={c['concurrency']} {esc(c['metric'])}: {esc(c['b'])} vs {esc(c['a'])} {diff} "
            f"-> {esc(c['verdict'])}"
        )
    if summary.get("aborted"):
        out.line(f"[red]stopped early[/red]: {esc(summary['aborted'])}")
    out.line("results: " + esc(written[0].parent))


def _fmt(spread: dict[str, Any], digits: int = 1) -> str:
    if spread.get("median") is None:
        return "-"
    return f"{spread['median']:.{digits}f} ({spread['p10']:.{digits}f}-{spread['p90']:.{digits}f})"
