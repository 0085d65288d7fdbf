"""What clients build on: tools (L-18), reasoning (L-45, L-46), vision (L-44).

Each check runs when the service declares the feature in its client facts;
a feature nobody promised is skipped, never passed. A model that cannot do
a declared feature (a small base model asked for tools) fails with the
answer it gave as evidence.
"""

from __future__ import annotations

import json
from typing import Any

from inferfleet.client.stream import REASONING_FIELDS
from inferfleet.probe.client_config import compare
from inferfleet.probe.evidence import Answer, CheckResult, Evidence, excerpt
from inferfleet.probe.images import COLOURS, data_url, solid_png
from inferfleet.probe.session import Session

EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
VISION_COLOUR = "red"
BARE_URL = "a bare URL declares nothing; probe a fleet service to test its promises"


def _message(answer: Answer) -> dict[str, Any]:
    choices = answer.obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _finish(answer: Answer) -> Any:
    choices = answer.obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0].get("finish_reason")
    return None


def tools(s: Session) -> CheckResult:
    title = "tool call round trip"
    declared = s.target.client.tools if s.target.client is not None else None
    if not declared:
        why = "the service does not declare tools" if declared is False else BARE_URL
        return CheckResult("tools", title, "L-18", "skip", why)
    question = "What is the weather in Paris right now? Call the get_weather tool."
    body = s.chat_body(question, max_tokens=64, tools=[WEATHER_TOOL], tool_choice="auto")
    first = s.exchange.post("/v1/chat/completions", body)
    message = _message(first)
    calls = message.get("tool_calls")
    shown = {"tool_calls": calls, "content": message.get("content"), "finish": _finish(first)}
    # llama.cpp says whether its template can render tools at all (L-18: silently ignored).
    caps = s.props.get("chat_template_caps")
    if isinstance(caps, dict) and "supports_tools" in caps:
        shown["template_supports_tools"] = caps["supports_tools"]
    hint = (
        "tools need --jinja and a chat template that supports them (L-18), and a model "
        "trained to call tools"
    )

    def fail(summary: str, *evidence: Evidence) -> CheckResult:
        s.findings.tools_ok = False
        return CheckResult("tools", title, "L-18", "fail", summary, evidence, hint)

    if first.status != 200:
        return fail(f"HTTP {first.status}", first.evidence())
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
        return fail(
            f"the answer has no tool_calls (finish_reason: {_finish(first)})",
            first.evidence(shown),
        )
    call = calls[0]
    raw_function = call.get("function")
    function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
    try:
        arguments = json.loads(str(function.get("arguments") or "{}"))
    except ValueError:
        arguments = None
    if function.get("name") != "get_weather" or not isinstance(arguments, dict):
        return fail(
            "the tool call names another function or its arguments are not JSON",
            first.evidence(shown),
        )
    follow = s.chat_body(question, max_tokens=64, tools=[WEATHER_TOOL])
    follow["messages"] += [
        {"role": "assistant", "content": message.get("content"), "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": call.get("id", "call_0"),
            "content": json.dumps({"city": arguments.get("city", "Paris"), "temperature_c": 18}),
        },
    ]
    second = s.exchange.post("/v1/chat/completions", follow)
    reply = _message(second).get("content")
    evidence = (first.evidence(shown), second.evidence({"content": reply}))
    if second.status != 200 or not isinstance(reply, str) or reply.strip() == "":
        return fail(f"the tool result was not answered (HTTP {second.status})", *evidence)
    s.findings.tools_ok = True
    return CheckResult(
        "tools", title, "L-18", "pass", f"get_weather({arguments}) called and answered", evidence
    )


def reasoning(s: Session) -> CheckResult:
    """Where the reasoning text lands, and content null when the budget runs out (L-45)."""
    title = "reasoning field"
    declared = s.target.client.reasoning_field if s.target.client is not None else None
    body = s.chat_body("Think it through step by step: what is 17 * 23?", max_tokens=64)
    answer = s.exchange.post("/v1/chat/completions", body)
    if answer.status != 200:
        return CheckResult(
            "reasoning", title, "L-45", "fail", f"HTTP {answer.status}", (answer.evidence(),)
        )
    message = _message(answer)
    found = next((f for f in REASONING_FIELDS if message.get(f)), None)
    s.findings.reasoning_field = found
    evidence = [answer.evidence({k: message.get(k) for k in ("content", *REASONING_FIELDS)})]
    if found is not None:
        content = message.get("content")
        if content:
            tiny = s.exchange.post("/v1/chat/completions", {**body, "max_tokens": 4})
            content = _message(tiny).get("content")
            evidence.append(tiny.evidence({"content": content, "finish": _finish(tiny)}))
        s.findings.content_null_on_budget = not content
    lands = f"reasoning lands in {found!r}" if found else "no reasoning text in the answer"
    if found and s.findings.content_null_on_budget:
        lands += "; content is null/empty when the whole budget goes to reasoning"
    if s.target.client is None:
        return CheckResult(
            "reasoning",
            title,
            "L-45",
            "skip",
            f"{lands} ({BARE_URL})",
            (*evidence,),
        )
    if declared == found:
        return CheckResult("reasoning", title, "L-45", "pass", lands, (*evidence,))
    if declared is None:
        summary = f"{lands}, but the service declares no reasoning field: clients will miss it"
    elif found is None:
        summary = f"the service declares {declared!r}, but the answer carries no reasoning text"
    else:
        summary = f"the service declares {declared!r}, the server uses {found!r}"
    return CheckResult(
        "reasoning",
        title,
        "L-45",
        "fail",
        summary,
        (*evidence,),
        hint="set client.reasoning_field to the field this runtime uses "
        "(llama.cpp and SGLang: reasoning_content, vLLM: reasoning)",
    )


def effort_map(accepted: list[str]) -> dict[str, str]:
    """Each standard level mapped to the nearest accepted value (ties go up) (L-46)."""
    if not accepted:
        return {}
    order = {name: i for i, name in enumerate(EFFORTS)}
    ranked = [a for a in EFFORTS if a in accepted]
    mapping = {}
    for level in EFFORTS:
        if level in accepted:
            mapping[level] = level
            continue
        mapping[level] = min(ranked, key=lambda a: (abs(order[a] - order[level]), -order[a]))
    return mapping


def efforts(s: Session) -> CheckResult:
    """Which ``reasoning_effort`` values the template accepts; 500 for others (L-46)."""
    title = "reasoning_effort values"
    accepted: list[str] = []
    refused: dict[str, int | None] = {}
    evidence = []
    for level in EFFORTS:
        answer = s.exchange.post(
            "/v1/chat/completions", s.chat_body("Say hi.", max_tokens=1, reasoning_effort=level)
        )
        if answer.status == 200:
            accepted.append(level)
        else:
            refused[level] = answer.status
            evidence.append(answer.evidence())
    s.findings.efforts_accepted = accepted
    s.findings.efforts_refused = refused
    s.findings.effort_map = effort_map(accepted)
    summary = f"accepted: {', '.join(accepted) or 'none'}"
    if refused:
        summary += f"; refused: {', '.join(f'{k} ({v})' for k, v in refused.items())}"
    shown = Evidence(
        "POST /v1/chat/completions x 5",
        "reasoning_effort in " + "|".join(EFFORTS) + ", max_tokens 1",
        200 if accepted else None,
        excerpt({"accepted": accepted, "refused": refused, "client_map": s.findings.effort_map}),
    )
    declared = s.target.client.reasoning_field if s.target.client is not None else None
    caps = s.props.get("chat_template_caps")
    if isinstance(caps, dict) and caps.get("supports_reasoning_effort") is False and accepted:
        # Accepted is not honoured: this template never reads the value.
        summary += " (the template ignores reasoning_effort)"
    if declared is None:
        return CheckResult(
            "efforts", title, "L-46", "skip", f"no reasoning declared; {summary}", (shown,)
        )
    if not accepted:
        return CheckResult("efforts", title, "L-46", "fail", summary, (shown, *evidence[:2]))
    # The incident: the client map sent a value the template refuses (L-46).
    assert s.target.client is not None  # a declared reasoning field implies client facts
    mismatches = compare(s.findings, {"reasoning_effort": s.target.client.reasoning_effort})
    if mismatches:
        return CheckResult(
            "efforts",
            title,
            "L-46",
            "fail",
            f"{summary}; {mismatches[0].message}",
            (shown, *evidence[:2]),
            hint="set client.reasoning_effort to the probed map: "
            + ", ".join(f"{k}: {v}" for k, v in s.findings.effort_map.items()),
        )
    return CheckResult("efforts", title, "L-46", "pass", summary, (shown, *evidence[:2]))


def vision(s: Session) -> CheckResult:
    """A solid-colour PNG through an ``image_url`` part; the answer must name the colour."""
    title = "vision (image_url)"
    if s.target.client is None:
        return CheckResult("vision", title, "L-44", "skip", BARE_URL)
    if "image" not in s.target.client.input:
        return CheckResult("vision", title, "L-44", "skip", "the service declares no image input")
    png = solid_png(COLOURS[VISION_COLOUR])
    parts = [
        {"type": "text", "text": "What colour is this image? Answer with one word."},
        {"type": "image_url", "image_url": {"url": data_url(png)}},
    ]
    body = s.chat_body(parts, max_tokens=16, temperature=0)
    answer = s.exchange.post("/v1/chat/completions", body)
    shown_body = {**body, "messages": [{"role": "user", "content": "[text, image_url: PNG]"}]}
    reply = _message(answer).get("content")
    evidence = [
        Evidence(
            "POST /v1/chat/completions",
            excerpt(shown_body),
            answer.status,
            excerpt({"content": reply} if answer.status == 200 else (answer.error or answer.text)),
        )
    ]
    modalities = s.props.get("modalities")
    if isinstance(modalities, dict):
        evidence.append(Evidence("GET /props", "", 200, excerpt({"modalities": modalities})))
    hint = "vision needs the projector passed explicitly (--mmproj, L-22) and a vision model"
    if answer.status != 200:
        s.findings.vision_ok = False
        return CheckResult(
            "vision", title, "L-44", "fail", f"HTTP {answer.status}", (*evidence,), hint
        )
    ok = isinstance(reply, str) and VISION_COLOUR in reply.lower()
    s.findings.vision_ok = ok
    if ok:
        return CheckResult(
            "vision", title, "L-44", "pass", f"named the colour: {reply!r}", (*evidence,)
        )
    return CheckResult(
        "vision",
        title,
        "L-44",
        "fail",
        f"a solid {VISION_COLOUR} image, answered {excerpt(str(reply), 80)!r}",
        (*evidence,),
        hint,
    )
