"""Does a client config agree with what the probe found on the endpoint?

A rendered client config advertises a context window, a completion budget,
where reasoning text lands, which inputs the model takes and how
``reasoning_effort`` levels map to values the template accepts. Each is a
promise to clients that the probe can test (L-25, L-26, L-44 to L-46).

The config is a plain mapping so any renderer can feed it; the keys read:

- ``context_window`` (int): must equal the per-slot window (L-25, L-26);
- ``max_tokens`` (int): must leave room for a prompt inside that window (L-26);
- ``reasoning_field`` (str or None): where the server puts reasoning (L-45);
- ``input`` (list of "text" / "image" / "audio"): image only where vision works (L-44);
- ``reasoning_effort`` (mapping level -> value sent): every value accepted (L-46);
- ``tools`` (bool): only where the tool round trip works (L-18).

Keys the config omits are not judged; findings the probe could not make
(``None``) are not judged either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from inferfleet.probe.evidence import Findings


@dataclass(frozen=True)
class Mismatch:
    key: str
    lesson: str
    config: Any
    probed: Any
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare(findings: Findings, config: Mapping[str, Any]) -> list[Mismatch]:
    out: list[Mismatch] = []
    window = config.get("context_window")
    slot = findings.n_ctx_slot
    if "context_window" in config and slot is not None and window != slot:
        out.append(
            Mismatch(
                "context_window",
                "L-25",
                window,
                slot,
                f"the config advertises {window} tokens, each server slot holds {slot}",
            )
        )
    max_tokens = config.get("max_tokens")
    limit = slot if slot is not None else window if isinstance(window, int) else None
    if isinstance(max_tokens, int) and limit is not None and max_tokens >= limit:
        out.append(
            Mismatch(
                "max_tokens",
                "L-26",
                max_tokens,
                limit,
                f"max_tokens {max_tokens} leaves no room for a prompt in a {limit}-token window",
            )
        )
    if "reasoning_field" in config:
        wanted = config.get("reasoning_field")
        found = findings.reasoning_field
        # Judged only when the probe saw reasoning text or the config expects some.
        if (found is not None or wanted is not None) and wanted != found:
            out.append(
                Mismatch(
                    "reasoning_field",
                    "L-45",
                    wanted,
                    found,
                    f"the config reads reasoning from {wanted!r}, the server writes {found!r}",
                )
            )
    inputs = config.get("input")
    if isinstance(inputs, list | tuple) and findings.vision_ok is not None:
        if "image" in inputs and not findings.vision_ok:
            out.append(
                Mismatch(
                    "input",
                    "L-44",
                    list(inputs),
                    "no vision",
                    "the config sends images, the vision probe failed",
                )
            )
        if "image" not in inputs and findings.vision_ok:
            out.append(
                Mismatch(
                    "input",
                    "L-44",
                    list(inputs),
                    "vision works",
                    "the endpoint reads images but the config does not offer them",
                )
            )
    efforts = config.get("reasoning_effort")
    if isinstance(efforts, Mapping) and (findings.efforts_accepted or findings.efforts_refused):
        bad = {
            k: v
            for k, v in efforts.items()
            if v is not None and v != "none" and v not in findings.efforts_accepted
        }
        if bad:
            out.append(
                Mismatch(
                    "reasoning_effort",
                    "L-46",
                    dict(efforts),
                    findings.efforts_accepted,
                    f"the config sends values the template refuses: {bad}",
                )
            )
    if config.get("tools") is True and findings.tools_ok is False:
        out.append(
            Mismatch("tools", "L-18", True, False, "the config offers tools, the round trip failed")
        )
    return out
