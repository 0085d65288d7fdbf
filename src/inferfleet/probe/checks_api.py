"""The API surface: health, the model id, both completion APIs, timings, metrics."""

from __future__ import annotations

import json
from typing import Any

from inferfleet.client import reports, server_timing
from inferfleet.client.router import ROUTER_ROLE, member_path
from inferfleet.client.stream import stream
from inferfleet.probe.evidence import CheckResult, Evidence, excerpt
from inferfleet.probe.session import PROBE_TOKENS, Session
from inferfleet.runtimes import registry

CHAT_PROMPT = "Name the three primary colours of light."
COMPLETION_PROMPT = "The three primary colours of light are"


def health(s: Session) -> CheckResult:
    answer = s.exchange.get("/health")
    title = "health"
    if answer.status == 200:
        return CheckResult("health", title, "L-34", "pass", "200: ready", (answer.evidence(),))
    if answer.status == 503:
        return CheckResult(
            "health",
            title,
            "L-34",
            "fail",
            "503: the server is still loading its model",
            (answer.evidence(),),
            hint="loading can take minutes; wait for 200 (never kill a loading server) "
            "and probe again",
        )
    what = "no answer" if answer.status is None else f"HTTP {answer.status}"
    return CheckResult(
        "health",
        title,
        "L-34",
        "fail",
        f"{what} on /health",
        (answer.evidence(),),
        hint="is the server running on this address? (inferfleet status)",
    )


def models(s: Session) -> CheckResult:
    answer = s.exchange.get("/v1/models")
    try:
        info = reports.openai_models(answer.obj, s.model)
    except reports.AnswerError:
        info = reports.ServerInfo()
    ids = list(info.models or ())
    named = s.model is not None
    if s.model is None and ids:
        s.model = ids[0]  # a bare URL: requests name the first model the server lists
    if info.model == s.model and info.ctx_per_slot is not None:
        s.findings.n_ctx_slot = info.ctx_per_slot
    evidence = (answer.evidence({"ids": ids}),)
    if s.model is not None and s.model in ids:
        s.findings.model = s.model
        how = "" if named else " (a bare URL: the first it lists)"
        return CheckResult(
            "alias", "model id listed", None, "pass", f"/v1/models lists {s.model!r}{how}", evidence
        )
    return CheckResult(
        "alias",
        "model id listed",
        None,
        "fail",
        f"/v1/models does not list {s.model!r} (it lists {ids})",
        evidence,
        hint="clients send this id: set the server's alias (--alias) to it",
    )


def read_props(s: Session) -> None:
    """llama.cpp's /props: slots, per-slot context, modalities. Silent when absent.

    A router's own /props is a placeholder (``"role": "router"``, ``n_ctx`` 0): a
    member's facts are its server's, read through the router with ``?model=``.
    """
    answer = s.exchange.get("/props")
    props = answer.obj
    if answer.status == 200 and props.get("role") == ROUTER_ROLE and s.model is not None:
        s.router = True
        answer = s.exchange.get(member_path("/props", s.model))
        props = answer.obj
    if answer.status != 200 or "default_generation_settings" not in props:
        return
    s.props = props
    s.findings.runtime = "llama.cpp"
    found = reports.llamacpp_props(props)
    if found.slots is not None:
        s.findings.total_slots = found.slots
    if s.findings.n_ctx_slot is None:
        s.findings.n_ctx_slot = found.ctx_per_slot
    modalities = props.get("modalities")
    if isinstance(modalities, dict):
        s.findings.modalities = ["text"] + [k for k, v in modalities.items() if v is True]


def _usage_verdict(usage: Any, finish: Any) -> tuple[bool, str]:
    if not isinstance(usage, dict):
        return False, "no usage in the answer"
    done = usage.get("completion_tokens")
    prompt = usage.get("prompt_tokens")
    if not isinstance(done, int) or not isinstance(prompt, int) or prompt <= 0:
        return False, f"usage lacks token counts: {excerpt(usage, 200)}"
    if done == PROBE_TOKENS or (finish == "stop" and 0 < done < PROBE_TOKENS):
        return True, f"usage: {prompt} prompt + {done} completion tokens (finish: {finish})"
    return False, f"asked for {PROBE_TOKENS} tokens, usage says {done} (finish: {finish})"


def _remember_timings(s: Session, where: str, data: dict[str, Any], headers: list[str]) -> None:
    timings = data.get("timings")
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    if isinstance(timings, dict):
        s.timings_seen.append((where, timings, usage.get("completion_tokens")))
    s.server_timing_seen.extend(headers)


def plain(s: Session, api: str) -> CheckResult:
    """A non-streamed request on ``api`` ("chat" or "completions")."""
    if api == "chat":
        path, body = "/v1/chat/completions", s.chat_body(CHAT_PROMPT, ignore_eos=True)
    else:
        path, body = "/v1/completions", s.completion_body(COMPLETION_PROMPT, ignore_eos=True)
    answer = s.exchange.post(path, body)
    data = answer.obj
    choices = data.get("choices") if isinstance(data.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    finish = first.get("finish_reason")
    _remember_timings(s, path, data, answer.headers.get_list("server-timing"))
    shown = {"usage": data.get("usage"), "finish_reason": finish}
    check_id, title = f"{api}", f"{api} (non-streamed)"
    if answer.status != 200:
        return CheckResult(
            check_id,
            title,
            None,
            "fail",
            f"HTTP {answer.status}" if answer.status else "no answer",
            (answer.evidence(),),
            hint="read the server log for the reason",
        )
    ok, why = _usage_verdict(data.get("usage"), finish)
    return CheckResult(
        check_id, title, "L-51", "pass" if ok else "fail", why, (answer.evidence(shown),)
    )


def streamed(s: Session, api: str) -> CheckResult:
    """A streamed request with ``stream_options.include_usage``: counts must arrive (L-51)."""
    if api == "chat":
        path, body = "/v1/chat/completions", s.chat_body(CHAT_PROMPT, ignore_eos=True)
    else:
        path, body = "/v1/completions", s.completion_body(COMPLETION_PROMPT, ignore_eos=True)
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    result = stream(s.exchange.client, path, body)
    usage: Any = None
    finish: Any = None
    for chunk in result.chunks:
        if isinstance(chunk.data.get("usage"), dict):
            usage = chunk.data["usage"]
        for choice in chunk.data.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                finish = choice["finish_reason"]
        _remember_timings(s, f"{path} (stream)", chunk.data, [])
    s.server_timing_seen.extend(result.server_timing)
    shown = {
        "events": len(result.chunks),
        "done_marker": result.saw_done,
        "usage": usage,
        "finish_reason": finish,
    }
    evidence = Evidence(
        f"POST {path}",
        excerpt(body),
        result.status,
        excerpt(result.error_body or result.error or shown),
    )
    check_id, title = f"{api}-stream", f"{api} (streamed, usage)"
    if result.status != 200 or result.error:
        return CheckResult(check_id, title, "L-51", "fail", result.error or "failed", (evidence,))
    ok, why = _usage_verdict(usage, finish)
    if ok and not result.saw_done:
        ok, why = False, "the stream never sent data: [DONE]"
    return CheckResult(check_id, title, "L-51", "pass" if ok else "fail", why, (evidence,))


def timings(s: Session) -> CheckResult:
    """The server's own timings: llama.cpp ``timings`` or a Server-Timing header (L-50)."""
    title = "server timings"
    parsed = server_timing.durations(s.server_timing_seen)
    s.findings.server_timing = parsed
    s.findings.timings_in_body = bool(s.timings_seen)
    if not s.timings_seen and not s.server_timing_seen:
        return CheckResult(
            "timings",
            title,
            "L-50",
            "skip",
            "the server sends neither a timings object nor a Server-Timing header",
            hint="bench falls back to the client clock with the server's usage counts",
        )
    problems = []
    for where, data, completion in s.timings_seen:
        needed = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
        missing = [k for k in needed if not isinstance(data.get(k), int | float)]
        if missing:
            problems.append(f"{where}: timings lack {', '.join(missing)}")
        elif isinstance(completion, int) and data["predicted_n"] != completion:
            problems.append(
                f"{where}: timings.predicted_n {data['predicted_n']} != usage {completion}"
            )
    if s.server_timing_seen and not parsed:
        problems.append(f"Server-Timing present but carries no durations: {s.server_timing_seen}")
    where, sample, _ = s.timings_seen[-1] if s.timings_seen else ("", {}, None)
    evidence = Evidence(
        "(from the answers above)",
        "",
        200,
        excerpt({"timings": sample, "where": where, "server_timing_ms": parsed}),
    )
    if problems:
        return CheckResult("timings", title, "L-50", "fail", "; ".join(problems), (evidence,))
    kinds = []
    if s.timings_seen:
        kinds.append(f"timings in {len(s.timings_seen)} answers, counts agree with usage")
    if parsed:
        kinds.append(f"Server-Timing: {', '.join(sorted(parsed))}")
    return CheckResult("timings", title, "L-50", "pass", "; ".join(kinds), (evidence,))


def draft(s: Session) -> CheckResult:
    """A drafter's acceptance as the server counted it (llama.cpp ``timings``: ``draft_n``,
    ``draft_n_accepted``), beside the decode rate of the same answers: a drafter is judged
    by both, a lower acceptance can still decode faster (L-13, L-48)."""
    title = "draft acceptance"
    drafted = [
        (where, data)
        for where, data, _ in s.timings_seen
        if _count(data.get("draft_n")) is not None
        and _count(data.get("draft_n_accepted")) is not None
    ]
    if not drafted:
        return _draft_by_metrics(s, title)
    proposed = sum(_count(d.get("draft_n")) or 0 for _, d in drafted)
    accepted = sum(_count(d.get("draft_n_accepted")) or 0 for _, d in drafted)
    rates = [
        float(d["predicted_per_second"])
        for _, d in drafted
        if isinstance(d.get("predicted_per_second"), int | float)
    ]
    where, sample = drafted[-1]
    evidence = Evidence(
        "(from the answers above)", "", 200, excerpt({"timings": sample, "where": where})
    )
    if accepted > proposed:
        return CheckResult(
            "draft", title, "L-13", "fail",
            f"the server counts {accepted} accepted of {proposed} drafted tokens",
            (evidence,),
        )  # fmt: skip
    share = f"{accepted / proposed:.0%}" if proposed else "none drafted"
    rate = f" at {sorted(rates)[len(rates) // 2]:.1f} tok/s decode" if rates else ""
    summary = (
        f"{accepted} of {proposed} drafted tokens accepted ({share}){rate} over "
        f"{len(drafted)} answers; judge the drafter by both"
    )
    return CheckResult("draft", title, "L-13", "pass", summary, (evidence,))


def draft_counters(s: Session) -> tuple[int, int] | None:
    """The server's (drafted, accepted) counters in /metrics now, where it has them."""
    if s.router:
        return None  # a router's members count for themselves
    answer = s.exchange.get("/metrics")
    if answer.status != 200:
        return None
    try:
        return registry.draft_counts(reports.metrics(answer.text))
    except reports.AnswerError:
        return None


def _draft_by_metrics(s: Session, title: str) -> CheckResult:
    """vLLM counts drafted and accepted tokens per engine: the difference of its counters
    over the probe's answers above."""
    before = s.draft_counters
    after = draft_counters(s) if before is not None else None
    if before is None or after is None or after[0] <= before[0]:
        return CheckResult(
            "draft", title, "L-13", "skip", "the server reports no drafted tokens (no drafter runs)"
        )
    proposed, accepted = after[0] - before[0], after[1] - before[1]
    evidence = Evidence(
        "GET /metrics", "", 200, excerpt({"drafted, accepted before": before, "after": after})
    )
    if not 0 <= accepted <= proposed:
        return CheckResult(
            "draft", title, "L-13", "fail",
            f"the server's counters say {accepted} accepted of {proposed} drafted tokens",
            (evidence,),
        )  # fmt: skip
    summary = (
        f"{accepted} of {proposed} drafted tokens accepted ({accepted / proposed:.0%}) over "
        f"the answers above, by the server's /metrics counters; judge the drafter by both "
        "this and the decode rate"
    )
    return CheckResult("draft", title, "L-13", "pass", summary, (evidence,))


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def metrics(s: Session) -> CheckResult:
    # A router serves a member's metrics with ?model= (HTTP 400 without it).
    path = member_path("/metrics", s.model) if s.router and s.model is not None else "/metrics"
    answer = s.exchange.get(path)
    title = "/metrics"
    if answer.status == 501:
        return CheckResult(
            "metrics",
            title,
            "L-56",
            "fail",
            "501: metrics are off, the endpoint silently drops out of monitoring",
            (answer.evidence(),),
            hint="start the server with --metrics (inferfleet's argv always has it)",
        )
    if answer.status != 200:
        what = "no answer" if answer.status is None else f"HTTP {answer.status}"
        return CheckResult(
            "metrics", title, "L-56", "fail", f"{what} on /metrics", (answer.evidence(),)
        )
    text = answer.text
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1].isalpha()}
    # The series each runtime serves with its metrics flag on (L-56): its traits'.
    runtime = s.findings.runtime or next(
        (t.kind for t in registry.every() if t.metrics.prefix in text), None
    )
    s.findings.runtime = s.findings.runtime or runtime
    if runtime is None:
        s.findings.metrics_ok = False
        return CheckResult(
            "metrics",
            title,
            "L-56",
            "fail",
            "200, but no llamacpp:, vllm: or sglang: series",
            (answer.evidence(json.dumps(sorted(names)[:20])),),
        )
    expected = registry.traits(runtime).metrics.series
    missing = [m for m in expected if m not in names]
    shown = answer.evidence({"expected": list(expected), "missing": missing})
    s.findings.metrics_ok = not missing
    if missing:
        return CheckResult(
            "metrics", title, "L-56", "fail", f"missing series: {', '.join(missing)}", (shown,)
        )
    return CheckResult(
        "metrics",
        title,
        "L-56",
        "pass",
        f"{runtime} series present ({len(names)} in all)",
        (shown,),
    )
