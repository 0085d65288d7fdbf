"""Does the fleet run what the other tool ran? The original argv against the rendered one.

Both command lines are parsed with llama.cpp's flag table and compared flag
by flag, one spelling per meaning (``-c`` is ``--ctx-size``), order ignored
(llama-server reads flags in any order; a repeated flag keeps its order). A
difference is *explained* when the import made it on purpose (a secret moved
out, a Hub model fetched and verified, a default written out, a lesson's
default such as ``--metrics``); any other difference means the imported
service would run something else, and the import is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inferfleet.importers.commandline import identify
from inferfleet.importers.engines import ENGINES
from inferfleet.importers.engines import canonical_flag as engine_flag
from inferfleet.importers.llamacpp import DEFAULTS_WRITTEN, POLICY_FLAGS, canonical_flag
from inferfleet.render.secrets import SECRET_FLAGS, redact
from inferfleet.runtimes import llamacpp as lc
from inferfleet.runtimes.flags import parse_args


@dataclass(frozen=True)
class Difference:
    flag: str
    original: str  # what the original command line had ("(absent)" when nothing)
    rendered: str
    why: str | None  # None: unexplained, the import is wrong


@dataclass
class Comparison:
    service: str
    same: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return all(d.why is not None for d in self.differences)


ABSENT = "(absent)"


def _flags(words: list[str], kind: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    table = ENGINES[kind].table if kind in ENGINES else lc.FLAGS

    def canonical(flag: str) -> str:
        return engine_flag(flag, kind) if kind in ENGINES else canonical_flag(flag)

    for arg in parse_args(words, lambda f: table.takes(table.canonical(f))):
        if arg.flag is not None:
            key = canonical(arg.flag)
        else:
            # vllm serve's first argument is its model.
            key = "--model" if kind == "vllm" and arg.index == 0 else "(positional)"
        if key == "--model-path":
            key = "--model"  # SGLang's two spellings of one flag
        found.setdefault(key, []).append("" if arg.value is None else arg.value)
    return found


def _show(key: str, values: list[str] | None) -> str:
    if values is None:
        return ABSENT
    if key in SECRET_FLAGS or key == "--api-key-file":
        return " | ".join(redact(v) for v in values)  # a report is no place for a secret (L-06)
    return " | ".join(v or "(set)" for v in values)


def compare_argv(
    service: str,
    original: list[str],
    rendered: list[str],
    explained: dict[str, str],
    *,
    program: int = 1,
    kind: str = "llama.cpp",
) -> Comparison:
    """``program``: how many words start the server when the command line does not say
    (``vllm serve`` is two; ``python -m vllm.entrypoints.openai.api_server`` three)."""
    result = Comparison(service)
    ours, theirs_program = identify(original), identify(rendered)
    n_original = program if ours is None else len(ours.program)
    n_rendered = program if theirs_program is None else len(theirs_program.program)
    if original[:n_original] != rendered[:n_rendered]:
        same_server = (
            ours is not None
            and theirs_program is not None
            and ours.kind == theirs_program.kind == "vllm"
        )
        why = "vLLM's API server module and `vllm serve` start one server" if same_server else None
        result.differences.append(
            Difference(
                "program",
                " ".join(original[:n_original]),
                " ".join(rendered[:n_rendered]),
                why,
            )
        )
    mine, theirs = _flags(original[n_original:], kind), _flags(rendered[n_rendered:], kind)
    for key in sorted(set(mine) | set(theirs)):
        was, now = mine.get(key), theirs.get(key)
        if was == now:
            result.same += 1
            continue
        why = explained.get(key)
        if why is None and was is None:
            default = DEFAULTS_WRITTEN.get(key) if kind == "llama.cpp" else None
            if default is not None and now == [default[0]]:
                why = default[1]
            elif key in POLICY_FLAGS:
                why = POLICY_FLAGS[key]
        result.differences.append(Difference(key, _show(key, was), _show(key, now), why))
    return result
