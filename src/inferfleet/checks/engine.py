"""The rule engine: a catalogue of rules, each the encoding of one lesson.

A rule has an id, the lesson it encodes (``L-xx`` in lessons.md), a severity
and a one-line title; its function yields :class:`Hit` (a problem, naming
the service and the field) or :class:`Skip` (it could not judge, and why).
Rules that need GGUF header facts read the local file through the context;
when the file is not here they skip with the reason instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from inferfleet.artifacts.locate import main_path
from inferfleet.errors import SpecError
from inferfleet.fleetfile.fleet import Fleet, Runtime, Service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.gguf import GGUFError, Inspection, inspect

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Hit:
    """A rule's finding before the engine stamps it with the rule's identity."""

    service: str | None
    field: str  # dotted path in the fleet file: services.chat.kv_cache.v
    message: str
    hint: str


@dataclass(frozen=True)
class Skip:
    subject: str  # the service or model the rule could not judge
    reason: str


@dataclass(frozen=True)
class Finding:
    rule: str
    lesson: str
    severity: Severity
    service: str | None
    field: str
    message: str
    hint: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class Skipped:
    rule: str
    lesson: str
    subject: str
    reason: str


RuleFn = Callable[["CheckContext"], Iterable[Hit | Skip]]


@dataclass(frozen=True)
class Rule:
    id: str
    lesson: str
    severity: Severity
    title: str
    needs_header: bool
    run: RuleFn
    topic: str


_RULES: dict[str, Rule] = {}


def rule(
    rule_id: str, lesson: str, severity: Severity, title: str, *, header: bool = False
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule function in the catalogue (ids are unique)."""

    def register(fn: RuleFn) -> RuleFn:
        if rule_id in _RULES:
            raise ValueError(f"rule id {rule_id!r} is registered twice")
        topic = fn.__module__.rsplit(".", 1)[-1]
        _RULES[rule_id] = Rule(rule_id, lesson, severity, title, header, fn, topic)
        return fn

    return register


def catalogue() -> list[Rule]:
    """Every rule, ordered by lesson then id."""
    from inferfleet.checks import topics  # noqa: F401 - importing registers the rules

    return sorted(_RULES.values(), key=lambda r: (int(r.lesson[2:]), r.id))


# ---------------------------------------------------------------- context


@dataclass
class CheckContext:
    """The fleet under check, and cached header reads of its local model files."""

    loaded: LoadedFleet
    _headers: dict[str, Inspection | str] = field(default_factory=dict)

    @property
    def fleet(self) -> Fleet:
        return self.loaded.fleet

    @property
    def root(self) -> Path:
        return self.loaded.root

    def llm(self) -> Iterator[tuple[str, Service, Runtime]]:
        """(name, service, runtime) of every llm service."""
        for name, service in self.fleet.services.items():
            if service.kind == "llm" and service.runtime is not None:
                yield name, service, self.fleet.runtimes[service.runtime]

    def model_file(self, model_name: str) -> Path | str:
        """The model's main GGUF on this machine, or why there is none to read."""
        model = self.fleet.models[model_name]
        try:
            path = main_path(model_name, model, self.root)
        except SpecError as exc:
            return f"model {model_name!r}: {exc.message}"
        if path is None:
            return f"model {model_name!r} is not a GGUF (header rules read GGUF files)"
        if not path.is_file():
            return f"model {model_name!r} is not on this machine (fetch it to run header rules)"
        return path

    def header(self, model_name: str) -> Inspection | str:
        """The model's header facts, or the reason they cannot be read here."""
        if model_name not in self._headers:
            self._headers[model_name] = self._read(model_name)
        return self._headers[model_name]

    def _read(self, model_name: str) -> Inspection | str:
        path = self.model_file(model_name)
        if isinstance(path, str):
            return path
        try:
            return inspect(path)
        except GGUFError as exc:
            return f"model {model_name!r}: header unreadable: {exc.message}"


# ---------------------------------------------------------------- running


@dataclass(frozen=True)
class Report:
    file: str
    findings: list[Finding]
    skipped: list[Skipped]
    rules_run: int

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]


Locator = Callable[[str], tuple[int | None, int | None]]


def run_checks(
    loaded: LoadedFleet,
    *,
    rules: Iterable[Rule] | None = None,
    locate: Locator | None = None,
) -> Report:
    ctx = CheckContext(loaded)
    chosen = list(rules) if rules is not None else catalogue()
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for item in chosen:
        for result in item.run(ctx):
            if isinstance(result, Skip):
                skipped.append(Skipped(item.id, item.lesson, result.subject, result.reason))
                continue
            line, column = locate(result.field) if locate is not None else (None, None)
            findings.append(
                Finding(
                    item.id,
                    item.lesson,
                    item.severity,
                    result.service,
                    result.field,
                    result.message,
                    result.hint,
                    line,
                    column,
                )
            )
    findings.sort(key=lambda f: (f.line or 0, f.severity != "error", f.rule, f.field))
    return Report(str(loaded.path), findings, skipped, len(chosen))
