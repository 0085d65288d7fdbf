"""The rule engine: a catalogue of rules, each the encoding of one lesson.

A rule has an id, the lesson it encodes (``L-xx`` in lessons.md), a severity
and a one-line title (its function's docstring); its function yields :class:`Hit` (a problem, naming
the service and the field) or :class:`Skip` (it could not judge, and why).
Most rules judge one service at a time (:func:`service_rule`); rules that
need GGUF header facts (:func:`header_rule`) read them through the context's
:class:`ModelSources` (this machine's file, or, from the CLI, the installed
package or the Hub by range requests), and when no source can answer they skip
with the reason instead of guessing.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, cast

from inferfleet.artifacts.sources import LocalSources, SourceListing
from inferfleet.artifacts.st_model import SafetensorsModel
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.memreport import BootReport
from inferfleet.budget.shape import ModelShape, model_shape
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Fleet, Host, Runtime, Service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.gguf import Inspection
from inferfleet.render.facts import facts_for
from inferfleet.render.launch import resolve
from inferfleet.render.rpc import rpc_launch_args
from inferfleet.runtimes.flags import Arg, FlagSource, parse_args
from inferfleet.runtimes.registry import RuntimeTraits, traits

if TYPE_CHECKING:
    from inferfleet.facts.hosts import RecordedHost

Severity = Literal["error", "warning"]
_Answer = TypeVar("_Answer")
T = TypeVar("T")


@dataclass(frozen=True)
class Hit:
    """A rule's finding before the engine stamps it with the rule's identity."""

    service: str | None
    field: str  # dotted path in the fleet file: services.chat.kv_cache.v
    message: str
    hint: str
    # None: the rule's own severity. A rule registered as "error" may judge a
    # shape an operator runs on purpose a warning (with the arithmetic) and keep
    # the error for the incident itself.
    severity: Severity | None = None


@dataclass(frozen=True)
class Skip:
    subject: str  # the service or model the rule could not judge
    reason: str
    # The missing fact under the reason (a model's header not here): rules that
    # skip for one cause are reported once (`check`); None: the reason itself.
    cause: str | None = None


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
    waived: bool = False  # a waiver of the fleet file covers it (L-59): shown, fails nothing
    reason: str | None = None  # the waiver's reason


@dataclass(frozen=True)
class Skipped:
    rule: str
    lesson: str
    subject: str
    reason: str
    cause: str


RuleFn = Callable[["CheckContext"], Iterable[Hit | Skip]]
ServiceRuleFn = Callable[["Subject"], Iterable[Hit | Skip]]
_ServiceFn = TypeVar("_ServiceFn", bound=ServiceRuleFn)
HeaderRuleFn = Callable[["Subject", str, Inspection], Iterable[Hit]]
# Which services a per-service rule judges: every one, the llm ones, or the llm
# ones whose runtime serves GGUF files (where header facts and GGUF flags apply).
Services = Literal["all", "llm", "gguf"]


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


def _register(
    rule_id: str,
    lesson: str,
    severity: Severity,
    fn: Callable[..., object],
    run: RuleFn,
    *,
    header: bool,
    title: str | None = None,
) -> None:
    """Add a rule to the catalogue: its title is ``title``, else ``fn``'s docstring; its
    topic ``fn``'s module."""
    if rule_id in _RULES:
        raise ValueError(f"rule id {rule_id!r} is registered twice")
    title = title or fn.__doc__
    if not title:
        raise ValueError(f"rule {rule_id!r} has no docstring (it is the rule's title)")
    topic = fn.__module__.rsplit(".", 1)[-1]
    _RULES[rule_id] = Rule(rule_id, lesson, severity, title, header, run, topic)


def rule(
    rule_id: str, lesson: str, severity: Severity, *, title: str | None = None
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule over the whole fleet; its title is ``title``, else the function's
    docstring (``title``: one function registered for several rules of a table)."""

    def register(fn: RuleFn) -> RuleFn:
        _register(rule_id, lesson, severity, fn, fn, header=False, title=title)
        return fn

    return register


def service_rule(
    rule_id: str,
    lesson: str,
    severity: Severity,
    *,
    services: Services = "llm",
    title: str | None = None,
) -> Callable[[_ServiceFn], _ServiceFn]:
    """Register a rule judged once per service of ``services``, in fleet order; it skips a
    service it cannot judge, saying why (``title``: as for :func:`rule`)."""

    def register(fn: _ServiceFn) -> _ServiceFn:
        def run(ctx: CheckContext) -> Iterator[Hit | Skip]:
            for subject in ctx.subjects(services):
                yield from fn(subject)

        _register(rule_id, lesson, severity, fn, run, header=False, title=title)
        return fn

    return register


def main_model(subject: Subject) -> str | None:
    return subject.service.model


def header_rule(
    rule_id: str,
    lesson: str,
    severity: Severity,
    *,
    services: Services = "gguf",
    model: Callable[[Subject], str | None] = main_model,
) -> Callable[[HeaderRuleFn], HeaderRuleFn]:
    """Register a per-service rule over the GGUF header of the model ``model`` picks.

    ``model`` returns None where the rule does not apply to the service. The
    rule function gets the subject, the model's name and its header facts;
    where no source can give the header (:class:`ModelSources`) the rule skips,
    saying why.
    """

    def register(fn: HeaderRuleFn) -> HeaderRuleFn:
        def run(ctx: CheckContext) -> Iterator[Hit | Skip]:
            for subject in ctx.subjects(services):
                chosen = model(subject)
                if chosen is None:
                    continue
                facts = ctx.header(chosen)
                if isinstance(facts, str):
                    yield Skip(subject.name, facts, facts)
                else:
                    yield from fn(subject, chosen, facts)

        _register(rule_id, lesson, severity, fn, run, header=True)
        return fn

    return register


def catalogue() -> list[Rule]:
    """Every rule, ordered by lesson then id."""
    from inferfleet.checks import topics  # noqa: F401 - importing registers the rules

    return sorted(_RULES.values(), key=lambda r: (int(r.lesson[2:]), r.id))


# ---------------------------------------------------------------- context


class ModelSources(Protocol):
    """Where rules read a model's GGUF header and what its source says its files are.

    Each answer is the facts, or the reason they cannot be had (a rule then
    skips with it). :class:`LocalSources` reads this machine only; the CLI
    passes one that also reads package and Hub models without their files
    (:mod:`inferfleet.hub.headers`), so a CI checkout judges what a host would.
    """

    def header(self, model_name: str) -> Inspection | str: ...

    def safetensors(self, model_name: str) -> SafetensorsModel | str: ...

    def source_files(self, model_name: str) -> SourceListing | str: ...

    def boots(self, service_name: str) -> Sequence[BootReport] | None:
        """The service's measured boots recorded in the repository, or None (L-27)."""
        ...

    def host_gpus(self, host_name: str) -> RecordedHost | None:
        """The GPUs ``doctor`` discovered on the host, recorded in the repository, or None."""
        ...


@dataclass
class CheckContext:
    """The fleet under check, and cached reads of its models' headers and sources."""

    loaded: LoadedFleet
    sources: ModelSources | None = None
    # A runtime's own flag list (it runs the binary: an effect the CLI hands in,
    # install/runtime_flags.py); None: the rules that need it skip.
    flags: FlagSource | None = None
    today: datetime.date = field(default_factory=datetime.date.today)  # waivers' expiry
    _headers: dict[str, Inspection | str] = field(default_factory=dict)
    _listings: dict[str, SourceListing | str] = field(default_factory=dict)
    _safetensors: dict[str, SafetensorsModel | str] = field(default_factory=dict)
    _once: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sources is None:
            self.sources = LocalSources(self.loaded)

    @property
    def fleet(self) -> Fleet:
        return self.loaded.fleet

    @property
    def root(self) -> Path:
        return self.loaded.root

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """What ``compute`` finds about the whole fleet, computed once per check: several
        rules judge one finding (the exposure policy's problems, one rule per kind)."""
        if key not in self._once:
            self._once[key] = compute()
        return cast(T, self._once[key])

    def subjects(self, services: Services) -> Iterator[Subject]:
        """The services a per-service rule over ``services`` judges, in fleet order."""
        for name, service in self.fleet.services.items():
            subject = Subject(self, name, service)
            if services != "all" and (service.kind != "llm" or service.runtime is None):
                continue
            if services == "gguf" and not subject.traits.gguf:
                continue
            yield subject

    @property
    def _sources(self) -> ModelSources:
        assert self.sources is not None  # set by __post_init__
        return self.sources

    def header(self, model_name: str) -> Inspection | str:
        """The model's header facts, or the reason they cannot be read (asked once per model)."""
        return _asked_once(self._headers, model_name, self._sources.header)

    def missing_header(self, service_name: str) -> str | None:
        """Why the header of the service's model cannot be read, or None (read, or no model)."""
        model = self.fleet.services[service_name].model
        if model is None or model not in self.fleet.models:
            return None
        found = self.header(model)
        return found if isinstance(found, str) else None

    def shape_of(self, model_name: str) -> ModelShape:
        """The model's shape for sizing (a split over RPC workers), or BudgetError."""
        found = self.header(model_name)
        if isinstance(found, str):
            raise BudgetError(found)
        return model_shape(found)

    def boots(self, service_name: str) -> Sequence[BootReport] | None:
        """The service's recorded boots: the fit rules price it by them (L-27)."""
        return self._sources.boots(service_name)

    def host_gpus(self, host_name: str) -> RecordedHost | None:
        """The host's GPUs as recorded from ``doctor`` (``facts record --host``), or None."""
        return self._sources.host_gpus(host_name)

    def safetensors(self, model_name: str) -> SafetensorsModel | str:
        """A safetensors model's config and headers, or why not (asked once per model)."""
        return _asked_once(self._safetensors, model_name, self._sources.safetensors)

    def source_files(self, model_name: str) -> SourceListing | str:
        """What the model's source states about its files, or why it cannot be asked."""
        return _asked_once(self._listings, model_name, self._sources.source_files)


def _asked_once(
    cache: dict[str, _Answer], model_name: str, ask: Callable[[str], _Answer]
) -> _Answer:
    """A source's answer about a model, asked once per check (a Hub read is a request)."""
    if model_name not in cache:
        cache[model_name] = ask(model_name)
    return cache[model_name]


@dataclass(frozen=True)
class Subject:
    """One service as a per-service rule judges it."""

    ctx: CheckContext
    name: str
    service: Service

    @property
    def runtime(self) -> Runtime:
        """The runtime of an llm service (rules over "llm" or "gguf" services)."""
        assert self.service.runtime is not None, f"service {self.name!r} has no runtime"
        return self.ctx.fleet.runtimes[self.service.runtime]

    @property
    def traits(self) -> RuntimeTraits:
        return traits(self.runtime.kind)

    @property
    def host(self) -> Host:
        return self.ctx.fleet.hosts[self.service.host]

    def hit(self, field: str, message: str, hint: str, severity: Severity | None = None) -> Hit:
        """A finding on ``services.<name>.<field>`` (``severity``: the rule's unless given)."""
        return Hit(self.name, f"services.{self.name}.{field}", message, hint, severity)

    @property
    def argv(self) -> list[str] | str:
        """The service's effective launch argv, or why it cannot be built.

        Built by the adapter through the one launch resolver (paths as the
        host will see them, ``extra_args`` last), so rules judge what the
        server will really get, never the fleet fields alone.
        """
        facts = facts_for(self.ctx.fleet, fleet_subdir=self.ctx.loaded.repo_subdir)
        try:
            split = None
            if self.service.rpc:  # the split the launch passes, from the header rules read
                split = rpc_launch_args(self.ctx.fleet, self.name, self.ctx.shape_of)
            host = facts[self.service.host]
            return resolve(self.ctx.fleet, self.ctx.root, self.name, host, rpc_args=split).argv
        except FleetError as exc:
            return f"service {self.name!r}: its launch cannot be built: {exc.message}"

    @property
    def extra_args(self) -> list[Arg]:
        """``extra_args`` parsed, with the runtime's field flags known (the one parser)."""
        takes = self.traits.flags.takes if self.service.runtime is not None else None
        return parse_args(self.service.extra_args, takes)


# ---------------------------------------------------------------- running


@dataclass(frozen=True)
class Report:
    file: str
    findings: list[Finding]
    skipped: list[Skipped]
    rules_run: int

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error" and not f.waived]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning" and not f.waived]

    @property
    def waived(self) -> list[Finding]:
        return [f for f in self.findings if f.waived]

    @property
    def causes(self) -> dict[str, list[Skipped]]:
        """The skipped rules by the missing fact behind them, in first-seen order."""
        found: dict[str, list[Skipped]] = {}
        for skip in self.skipped:
            found.setdefault(skip.cause, []).append(skip)
        return found

    def passed(self, *, strict: bool = False, require_facts: bool = False) -> bool:
        """No unwaived errors; with ``strict`` (CI) no unwaived warning either; with
        ``require_facts`` no rule skipped for a missing fact."""
        if self.errors or (strict and self.warnings):
            return False
        return not (require_facts and self.skipped)


Locator = Callable[[str], tuple[int | None, int | None]]


def run_checks(
    loaded: LoadedFleet,
    *,
    rules: Iterable[Rule] | None = None,
    locate: Locator | None = None,
    sources: ModelSources | None = None,
    flags: FlagSource | None = None,
    today: datetime.date | None = None,
) -> Report:
    """Run ``rules`` (default: the catalogue); header facts come from ``sources``
    (default: this machine only, :class:`LocalSources`), runtimes' flag lists
    from ``flags`` (default: none; those rules skip)."""
    ctx = CheckContext(loaded, sources, flags)
    if today is not None:
        ctx.today = today
    chosen = list(rules) if rules is not None else catalogue()
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for item in chosen:
        for result in item.run(ctx):
            if isinstance(result, Skip):
                cause = result.cause or result.reason
                skipped.append(Skipped(item.id, item.lesson, result.subject, result.reason, cause))
                continue
            findings.append(_stamped(item, result, locate))
    from inferfleet.checks import waivers  # the waivers' own rule lives there

    findings, stray = waivers.apply(ctx, findings, {r.id for r in chosen})
    stale = _RULES[waivers.RULE_ID]
    findings += [_stamped(stale, hit, locate) for hit in stray]
    findings.sort(key=lambda f: (f.line or 0, f.severity != "error", f.rule, f.field))
    return Report(str(loaded.path), findings, skipped, len(chosen))


def _stamped(item: Rule, result: Hit, locate: Locator | None) -> Finding:
    """A rule's hit as a finding: the rule's identity, and the field's line in the file."""
    line, column = locate(result.field) if locate is not None else (None, None)
    return Finding(
        item.id,
        item.lesson,
        result.severity or item.severity,
        result.service,
        result.field,
        result.message,
        result.hint,
        line,
        column,
    )
