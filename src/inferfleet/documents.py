"""The versioned ``--json`` documents, as types: one TypedDict per document, all in one place.

Every document a command prints with ``--json`` is built as one of these
types (mypy checks the keys and value types where it is built) and carries
its version in ``schema`` (``"inferfleet.check/v1"``). :func:`json_schema`
turns a document type into its JSON Schema (draft 2020-12, unknown keys
refused), which the tests validate each command's real output against and
which scripts can use to check what they parse.

Adding a key to a document is compatible; renaming or removing one, or
changing its meaning, is a new version (``/v2``) with a new type.

Nested parts that are another model's own dump (the fleet file as parsed, a
service's spec, a runtime's client block) are typed ``dict[str, Any]``: the
fleet file's schema is ``inferfleet schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import (
    Any,
    Literal,
    NotRequired,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import TypeAdapter
from typing_extensions import TypedDict

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

D = TypeVar("D")


def document_of(doc_type: type[D], source: object, **override: object) -> D:
    """A ``doc_type`` document whose keys are ``source``'s attributes of the same name.

    Keys come in the order the type declares them (the JSON's key order);
    ``override`` gives the value of a key whose attribute has another name or
    shape. A ``NotRequired`` key is set only when ``override`` names it. Lists,
    tuples and dicts are copied (tuples become lists), so the document shares
    no mutable value with ``source``. A key the type does not declare, or a
    required key ``source`` lacks, is a programming error (TypeError,
    AttributeError).
    """
    typed_dict: type = doc_type  # a class, so hashable: its keys are read once
    keys = _keys(typed_dict)
    unknown = sorted(set(override) - set(keys))
    if unknown:
        raise TypeError(f"{doc_type.__name__} has no key(s) {', '.join(unknown)}")
    values: dict[str, object] = {}
    for key, required in keys.items():
        if key in override:
            values[key] = override[key]
        elif required:
            values[key] = _copied(getattr(source, key))
    return cast(D, values)


@cache
def _keys(doc_type: type) -> dict[str, bool]:
    """A document type's keys in declaration order, each with whether it is required."""
    hints = get_type_hints(doc_type, include_extras=True)
    return {key: get_origin(hint) is not NotRequired for key, hint in hints.items()}


def _copied(value: object) -> object:
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


# ----------------------------------------------------------- fleet file: validate, show


class FleetCounts(TypedDict):
    hosts: int
    runtimes: int
    models: int
    services: int


class ValidationIssue(TypedDict):
    line: int | None
    column: int | None
    message: str
    hint: str


class ValidateDocument(TypedDict):
    schema: Literal["inferfleet.validate/v1"]
    file: str
    valid: bool
    errors: list[ValidationIssue]
    counts: NotRequired[FleetCounts]  # only for a valid file


class ShowFleetDocument(TypedDict):
    """``show`` without a service: the whole fleet as parsed."""

    schema: Literal["inferfleet.show/v1"]
    file: str
    fleet: dict[str, Any]


class ShowServiceDocument(TypedDict):
    """``show SERVICE``: the service as parsed, and the launch it runs (render/pipeline)."""

    schema: Literal["inferfleet.show/v1"]
    file: str
    service: str
    spec: dict[str, Any]
    ctx_total: int
    argv: list[str]
    spec_digest: str
    image: NotRequired[str]
    model_bytes: NotRequired[int]


# ----------------------------------------------------------------------- check, secrets


class CheckFinding(TypedDict):
    rule: str
    lesson: str
    severity: str  # error | warning
    service: str | None
    field: str
    line: int | None
    column: int | None
    message: str
    hint: str
    waived: bool  # a waiver of the fleet file covers it (L-59); it fails nothing
    reason: str | None  # the waiver's reason


class CheckSkip(TypedDict):
    rule: str
    lesson: str
    subject: str
    reason: str
    cause: str  # the missing fact; skips of one cause are reported once


class CheckCounts(TypedDict):
    error: int  # unwaived
    warning: int  # unwaived
    skipped: int
    waived: int
    causes: int  # distinct reasons rules were skipped for


class CheckDocument(TypedDict):
    schema: Literal["inferfleet.check/v1"]
    file: str
    ok: bool
    rules_run: int
    counts: CheckCounts
    findings: list[CheckFinding]
    skipped: list[CheckSkip]
    notes: list[str]  # facts read from the repository (facts/) instead of the files, or why not


class CheckRule(TypedDict):
    id: str
    lesson: str
    severity: str
    topic: str
    needs_header: bool
    title: str


class CheckRulesDocument(TypedDict):
    schema: Literal["inferfleet.check.rules/v1"]
    rules: list[CheckRule]


class LessonText(TypedDict):
    """One operational lesson as users read it (``src/inferfleet/lessons``)."""

    id: str
    kind: str  # check | gate | default | probe | bench
    title: str
    happened: str
    why: str
    does: str


class ExplainDocument(TypedDict):
    """``explain L-xx`` or ``explain RULE``: the lesson, the rule asked for, and every
    rule of ``check`` that encodes the lesson."""

    schema: Literal["inferfleet.explain/v1"]
    lesson: LessonText
    rule: CheckRule | None  # the rule asked for; None when a lesson was asked for
    rules: list[CheckRule]


class SecretFinding(TypedDict):
    path: str
    line: int
    what: str
    redacted: str  # never the secret itself


class SecretsScanDocument(TypedDict):
    schema: Literal["inferfleet.secrets-scan/v1"]
    files: int
    secret_values: int
    findings: list[SecretFinding]


# --------------------------------------------------------------------------- render, diff


class RenderedFile(TypedDict):
    path: str
    kind: str
    sha256: str
    install: str | None


class RenderDocument(TypedDict):
    schema: Literal["inferfleet.render/v1"]
    file: str
    out: str
    files: list[RenderedFile]


class DiffChange(TypedDict):
    path: str
    status: str  # added | changed | removed
    diff: str


class DiffDocument(TypedDict):
    schema: Literal["inferfleet.diff/v1"]
    out: str
    changes: list[DiffChange]


# ------------------------------------------------------------------------------ runtimes


class RuntimeDocument(TypedDict):
    """``runtime install llama.cpp``: the installed build's record."""

    schema: Literal["inferfleet.runtime/v1"]
    runtime: str
    built: bool  # built by this call (False: it was cached)
    binary: str
    package: str
    version: str
    commit: str | None
    cmake_args: list[str]
    version_text: str
    built_at: float
    build_seconds: float


class VenvRuntimeDocument(TypedDict):
    """``runtime install vllm``: the pinned package's venv record."""

    schema: Literal["inferfleet.runtime-venv/v1"]
    runtime: str
    installed_now: bool  # installed by this call (False: it was cached)
    python: str
    package: str
    version: str
    removed: list[str]
    installed_at: float
    install_seconds: float


class RuntimeRow(TypedDict):
    runtime: str
    kind: str
    pin: str | None
    installed: bool
    binary: str | None
    version: str | None


class RuntimesDocument(TypedDict):
    schema: Literal["inferfleet.runtimes/v1"]
    runtimes: list[RuntimeRow]


# -------------------------------------------------------------------------- gguf inspect


class KVPerTokenBytes(TypedDict):
    full: int
    swa: int
    nextn: int


class KVContext(TypedDict):
    ctx: int
    parallel: int
    n_ctx: int
    streams: int
    cells_full: int
    cells_swa: int
    full_bytes: int
    swa_bytes: int
    total_bytes: int


class KVSizing(TypedDict):
    cache_type_k: str
    cache_type_v: str
    per_token: KVPerTokenBytes
    context: NotRequired[KVContext]  # with --ctx


class Experts(TypedDict):
    count: int | None
    used: int | None


class ChatTemplateInfo(TypedDict):
    present: bool
    length: int | None
    named: list[str]


class TokenizerInfo(TypedDict):
    model: str | None
    vocab_size: int | None


class TypeCount(TypedDict):
    id: int
    name: str
    count: int
    bytes: int | None  # None: a type whose size is unknown
    known: bool


class LayerBytes(TypedDict):
    layer: int
    bytes: int


class SplitPart(TypedDict):
    source: str
    number: int | None
    tensor_count: int
    tensor_bytes: int
    header_bytes: int
    file_size: int | None


class SplitInfo(TypedDict):
    count: int
    parts: list[SplitPart]


class MetadataValue(TypedDict):
    type: str | None
    value: Any


class TensorRow(TypedDict):
    name: str
    shape: list[int]
    type: str
    type_id: int
    offset: int
    elements: int
    bytes: int | None


class GGUFInspectDocument(TypedDict):
    schema: Literal["inferfleet.gguf.inspect/v1"]
    location: str
    version: int
    architecture: str | None
    name: str | None
    file_type: str | None
    parameters: int
    tensor_count: int
    tensor_bytes: int
    context_length: int | None
    block_count: int | None
    nextn_layers: int
    head_count: int | list[int] | None
    head_count_kv: int | list[int] | None
    key_length: int | None
    value_length: int | None
    sliding_window: int | None
    swa_layers: list[int]
    full_attention_layers: list[int]
    recurrent_layers: list[int]
    experts: Experts
    chat_template: ChatTemplateInfo
    tokenizer: TokenizerInfo
    kv: KVSizing | None  # None: an architecture without a known KV layout
    types: list[TypeCount]
    layers: list[LayerBytes]
    split: SplitInfo | None
    metadata: dict[str, MetadataValue]
    problems: list[str]
    notes: list[str]
    tensors: NotRequired[list[TensorRow]]  # with --tensors


# -------------------------------------------------------------------------------- budget


class BudgetModel(TypedDict):
    location: str
    architecture: str | None
    trained_context: int | None


class BudgetContext(TypedDict):
    ctx: int
    ctx_per_slot: int
    parallel: int
    cache_type_k: str
    cache_type_v: str
    flash_attn: bool
    n_ubatch: int
    unified: bool
    streams: int
    cells_full: int
    cells_swa: int
    kv_bytes: int


class BudgetDevice(TypedDict):
    """One device's share, in bytes."""

    name: str
    kind: str
    runtime_name: str | None
    memory: int | None  # None: the fleet file does not say
    weights: int
    kv: int
    state: int
    compute: int
    output: int
    projector: int
    drafter: int
    headroom: int
    used: int
    margin: int | None
    fits: bool | None  # None: unknown memory, so unknown
    measured: bool  # weights holds the measured non-KV cost (weights + compute)


class BudgetSolve(TypedDict):
    ctx_per_slot: int | None
    ctx: int | None
    limit: str


class MemoryParts(TypedDict):
    model: int
    context: int
    compute: int
    total: int


class BudgetComparison(TypedDict):
    device: str
    n_ctx: int
    measured: MemoryParts
    predicted: MemoryParts


class Budget(TypedDict):
    """A budget as data (``budget.report.budget_document``); sizes in bytes."""

    model: BudgetModel
    context: BudgetContext
    devices: list[BudgetDevice]
    fits: bool
    notes: list[str]


class BudgetService(Budget):
    service: str
    solve: BudgetSolve | None  # with --solve
    measured: list[BudgetComparison] | None  # with --from-log


class BudgetSkip(TypedDict):
    service: str
    reason: str


class BudgetVllm(TypedDict):
    """A vLLM service's budget (``budget.vllm_report``); sizes in bytes."""

    service: str
    model: str  # where its config and headers were read
    device: str  # cpu, or the accelerator vendor
    dtype: str  # what vLLM runs the model in
    weights: int  # in memory: float tensors cast to dtype
    weights_on_disk: int  # the safetensors headers' tensor bytes
    kv_bytes_per_token: int  # one rank, all layers
    kv_pool: int  # the KV cache memory of one rank
    exact: bool  # the pool is given (VLLM_CPU_KVCACHE_SPACE); False: estimated
    block_size: int
    bytes_per_block: int
    blocks: int
    blocks_per_request: int
    tokens: int  # what vLLM logs as "KV cache size: N tokens"
    max_model_len: int
    max_num_seqs: int
    wanted_tokens: int  # max_model_len x max_num_seqs
    starts: bool  # one request at max_model_len fits
    fits: bool  # every slot's window fits at once
    notes: list[str]


class BudgetGroup(TypedDict):
    group: str
    max_loaded: int  # 0: no limit
    bytes: int  # the largest simultaneous set
    counted: list[str]
    members: list[str]
    unsized: list[str]


class BudgetRpcPool(TypedDict):
    label: str  # host | a local device | worker HOST:DEVICE
    device: str  # llama.cpp's name: CPU, CUDA0, RPC0
    layers: int  # layer slots (blocks + output layer)
    weights_bytes: int  # what the server logs as that device's model buffer
    memory_bytes: int
    fits: bool


class BudgetRpc(TypedDict):
    """A model split over RPC workers: what --rpc and --tensor-split put where."""

    service: str
    n_gpu_layers: int
    tensor_split: list[float]  # one share per device, RPC devices first
    pools: list[BudgetRpcPool]
    fits: bool


class BudgetDocument(TypedDict):
    schema: Literal["inferfleet.budget/v1"]
    file: str
    services: list[BudgetService]
    vllm: list[BudgetVllm]
    skipped: list[BudgetSkip]
    groups: list[BudgetGroup]
    rpc: NotRequired[list[BudgetRpc]]


# ------------------------------------------------------------------------ up, down, status


class MinimalCheck(TypedDict):
    name: str
    ok: bool
    detail: str


class UpService(TypedDict):
    service: str
    action: str  # started | restarted | unchanged | held (stop --hold: left down)
    url: str
    pid: int | None  # None for a systemd / Quadlet service (its unit owns the process)
    model: str
    ctx_per_slot: int
    parallel: int
    seconds_to_healthy: float | None
    checks: list[MinimalCheck]
    reason: str
    revision: str  # the checkout's HEAD, or "untracked" outside a clean git checkout
    health: Literal["healthy", "held"]
    contract: str  # passed | failing | skipped; "" for a kept service not probed again
    evidence: list[str]  # the failed contract checks, first first


class UpGateway(TypedDict):
    """The gateway ``up`` brought up after the services."""

    action: str  # started | restarted | unchanged
    url: str  # its base URL (.../v1)
    pid: int | None
    engine: str  # "litellm 1.106.12"
    seconds_to_healthy: float | None
    reason: str
    unhealthy_backends: list[str]  # fronted services not healthy when it started


class UpProxy(TypedDict):
    """The auth proxy (Caddy) ``up`` brought up after the gateway."""

    action: str  # started | restarted | unchanged
    url: str  # https://name:port, what clients use
    pid: int | None
    engine: str  # "caddy v2.11.7"
    seconds_to_healthy: float | None
    root: str  # the local CA root clients trust (tls internal), else ""
    reason: str


class UpDocument(TypedDict):
    schema: Literal["inferfleet.up/v1"]
    file: str
    services: list[UpService]
    pending: NotRequired[list[str]]  # not started: an earlier service's contract failed
    gateway: NotRequired[UpGateway]  # when the fleet's gateway runs on this machine
    proxy: NotRequired[UpProxy]  # when the fleet's auth proxy runs on this machine


class DownService(TypedDict):
    service: str
    outcome: str  # terminated | killed | gone | stale | not-running
    pid: int | None
    detail: str


class DownDocument(TypedDict):
    schema: Literal["inferfleet.down/v1"]
    services: list[DownService]


class RevisionInfo(TypedDict):
    state: str  # status.model.REVISION_STATES
    deployed: str | None
    head: str | None
    applied_at: float | None
    reasons: list[str]


class BenchLevelFigures(TypedDict):
    concurrency: int
    decode_tps: float | None
    aggregate_tps: float | None
    ttft_ms: float | None


class BenchFiguresInfo(TypedDict):
    summary: str
    finished_at: str
    arm: str
    api: str | None
    max_tokens: int | None
    levels: list[BenchLevelFigures]


class StatusService(TypedDict):
    service: str
    host: str
    kind: str
    runtime: str | None
    backend: str
    state: str  # status.model.STATES
    url: str
    links: dict[str, str]
    detail: str
    pid: int | None
    pid_source: str | None
    uptime_s: float | None
    runtime_version: str | None
    model: str | None
    ctx_per_slot: int | None
    parallel: int | None
    slots: int | None
    busy_slots: int | None
    requests_processing: float | None
    requests_deferred: float | None
    metrics: str
    revision: RevisionInfo
    bench: BenchFiguresInfo | None
    notes: list[str]
    members: dict[str, str]  # a swap group's members by alias: loaded | sleeping | unloaded ...


class StatusHost(TypedDict):
    host: str
    address: str
    local: bool
    reach: str  # local | ssh | http | unreachable
    detail: str
    checkout_head: str | None
    lock: str | None
    services: int
    healthy: int


class StatusGateway(TypedDict):
    """The gateway's row: up or not, and which fronted backends it reaches."""

    host: str
    url: str  # the base URL clients use (.../v1)
    state: str  # healthy | degraded | down | unhealthy | foreign
    pid: int | None
    engine: str | None  # "litellm 1.106.12" (this machine's record)
    backends: dict[str, str]  # service -> ok | the error LiteLLM reports
    unreachable: list[str]  # services it cannot reach
    detail: str


class StatusProxy(TypedDict):
    """The auth proxy's row: Caddy up or not, and whether its upstreams answer."""

    host: str
    url: str  # https://name:port
    state: str  # healthy | degraded | down | unhealthy | foreign
    pid: int | None
    engine: str | None  # "caddy v2.11.7" (this machine's record)
    upstreams: dict[str, str]  # gateway or service -> ok | what answered through Caddy
    detail: str


class StatusDocument(TypedDict):
    """``status --json`` and the board's ``/api/status`` (which adds ``inferfleet``)."""

    schema: Literal["inferfleet.status/v2"]
    inferfleet: NotRequired[str]  # the board's version stamp
    ok: bool  # every service in scope healthy (or held), the front door too: exit 0
    file: str
    head: str | None
    collected_at: float
    hosts: list[StatusHost]
    services: list[StatusService]
    notes: list[str]
    gateway: NotRequired[StatusGateway]  # when the fleet declares one
    proxy: NotRequired[StatusProxy]  # when the fleet declares one


# --------------------------------------------------------------------------- probe, bench


class ProbeEvidence(TypedDict):
    request: str
    body: str
    status: int | None
    answer: str


class ProbeCheck(TypedDict):
    id: str
    title: str
    lesson: str | None
    status: Literal["pass", "fail", "skip"]
    summary: str
    evidence: list[ProbeEvidence]
    hint: str


class ProbeFindings(TypedDict):
    model: str | None
    runtime: str | None
    n_ctx_slot: int | None
    total_slots: int | None
    modalities: list[str]
    timings_in_body: bool
    server_timing: dict[str, float]
    reasoning_field: str | None
    content_null_on_budget: bool | None
    efforts_accepted: list[str]
    efforts_refused: dict[str, int | None]
    effort_map: dict[str, str]
    tools_ok: bool | None
    vision_ok: bool | None
    metrics_ok: bool | None


class ProbeTarget(TypedDict):
    label: str
    url: str
    service: str | None
    model: str | None
    declared: dict[str, Any] | None  # ctx_per_slot, parallel and the service's client block


# "pass" is a Python keyword: the functional form names it.
ProbeCounts = TypedDict("ProbeCounts", {"pass": int, "fail": int, "skip": int})


class ProbeDocument(TypedDict):
    schema: Literal["inferfleet.probe/v1"]
    target: ProbeTarget
    ok: bool
    counts: ProbeCounts
    checks: list[ProbeCheck]
    findings: ProbeFindings


class BenchHost(TypedDict):
    cpus: int | None
    machine: str
    python: str


class BenchPrompt(TypedDict):
    id: str
    kind: str
    title: str
    licence: str


class BenchBattery(TypedDict):
    name: str
    version: int
    prompts: list[BenchPrompt]


class BenchOptions(TypedDict):
    api: str
    concurrency: list[int]
    runs: int
    max_tokens: int
    ignore_eos: bool
    min_decode_tokens: int
    warmup: bool


class BenchArm(TypedDict):
    name: str
    kind: str  # running | started
    url: str
    service: str | None
    model: str | None
    runtime: str | None
    request_extra: dict[str, Any]
    server: dict[str, Any] | None  # the started server's life (bench.arms.ServerLife)
    cold_load_s: float | None  # a swap group member's load before measuring, on its own


class BenchCache(TypedDict):
    requests: int
    reported: int
    hits: int
    max_cached_tokens: int | None


class BenchDocument(TypedDict):
    """``bench --json`` and the ``summary.json`` it writes (one level per arm x concurrency)."""

    schema: Literal["inferfleet.bench/v1"]
    inferfleet: str
    started_at: str
    finished_at: str
    host: BenchHost
    battery: BenchBattery
    options: BenchOptions
    arms: list[BenchArm]
    levels: list[dict[str, Any]]  # bench.summary.level_summary: spreads per metric, runs
    comparisons: list[dict[str, Any]]  # A/B verdicts with their noise (bench.stats)
    cache: BenchCache
    aborted: str | None


# -------------------------------------------------------------------- plan, deploy, apply


class PlanItem(TypedDict):
    service: str
    action: str  # deploy | retire | keep
    reasons: list[str]
    recorded: str | None


class PlannedItem(PlanItem):
    selected: bool


class Failure(TypedDict):
    service: str
    error: str  # the error's class name (ContractFailingError: deployed, contract failing)
    message: str
    where: str
    hint: str
    log_tail: str
    evidence: NotRequired[list[str]]  # a contract failure's failed checks, first first


class ActionRow(TypedDict):
    kind: str
    service: str
    detail: str


class HostPlanRow(TypedDict):
    host: str
    error: Failure | None  # why the host could not be planned
    lock: str | None
    items: list[PlannedItem]
    actions: list[ActionRow]


class PlanDocument(TypedDict):
    schema: Literal["inferfleet.plan/v1"]
    revision: str
    hosts: list[HostPlanRow]


class DeployPlanDocument(TypedDict):
    """``deploy --dry-run --json``: the plan with each host's actions."""

    schema: Literal["inferfleet.deploy-plan/v1"]
    revision: str
    hosts: list[HostPlanRow]


class DeployHost(TypedDict):
    host: str
    ok: bool
    result: dict[str, Any] | None  # the host's inferfleet.apply/v1 document
    error: Failure | None


class DeployDocument(TypedDict):
    schema: Literal["inferfleet.deploy/v1"]
    revision: str
    hosts: list[DeployHost]


class ApplyDocument(TypedDict):
    schema: Literal["inferfleet.apply/v1"]
    host: str
    revision: str
    dry_run: bool
    ok: bool
    outcome: NotRequired[str]  # ok | failed | contract-failing (deployed, healthy, contract fails)
    plan: list[PlanItem]
    selected: list[str]
    done: list[dict[str, Any]]  # deploy.apply.Outcome per service
    failed: Failure | None
    pending: list[str]
    actions: list[ActionRow]


class FactsDocument(TypedDict):
    """``apply --facts``: what plan and ``deploy --dry-run`` read from a host."""

    schema: Literal["inferfleet.facts/v1"]
    host: str
    head: str
    dirty: list[str]  # `git status --porcelain` lines of the checkout
    state_dir: str
    lock: str | None
    markers: dict[str, dict[str, Any]]
    facts: dict[str, Any] | None
    states: dict[str, dict[str, Any]]
    # A service asked about that has no marker -> the revision it ran when retired.
    retired: NotRequired[dict[str, str]]
    # Services held down there (stop --hold): service -> {service, reason, since, by}.
    holds: NotRequired[dict[str, dict[str, Any]]]


# -------------------------------------------------------------------------------- models


class ManifestFile(TypedDict):
    path: str
    size: int
    kind: str  # sha256 | git-sha1 | parts
    hash: str


class ModelsManifestDocument(TypedDict):
    schema: Literal["inferfleet.models.manifest/v1"]
    repo: str
    revision: str
    commit: str | None  # the commit the revision pointed at, when the listing named it
    out: str | None
    files: list[ManifestFile]


class VerifiedFile(TypedDict):
    path: str
    size: int
    status: str
    method: str
    detail: str


class ModelsVerifyDocument(TypedDict):
    schema: Literal["inferfleet.models.verify/v1"]
    model: str
    folder: str
    ok: bool
    files: list[VerifiedFile]


class FetchedFile(TypedDict):
    path: str
    size: int
    status: str
    fetched: int
    reused: int
    seconds: float
    sha256: str | None


class FetchFailure(TypedDict):
    path: str
    error: str
    hint: str


class ModelsFetchDocument(TypedDict):
    schema: Literal["inferfleet.models.fetch/v1"]
    model: str
    repo: str
    commit: str
    folder: str
    ok: bool
    fetched_bytes: int
    reused_bytes: int
    seconds: float
    files: list[FetchedFile]
    failures: list[FetchFailure]


class ArchiveFileRow(TypedDict):
    path: str  # the original absolute path on the host
    mode: str  # octal permission bits, e.g. "0600"
    sha256: str
    size: int


class ArchiveEntryRow(TypedDict):
    entry: str  # the entry's name (what `archive restore` takes)
    folder: str
    service: str | None  # None when the index is damaged
    revision: str | None
    reason: str | None  # retire | replace | overwrite
    when: str  # ISO 8601, UTC (from the entry's name)
    bytes: int
    files: list[ArchiveFileRow]
    problem: str | None  # why the index cannot be trusted; None when it is sound
    restores: NotRequired[list[ArchiveRestoreRow]]  # when its files went back, oldest first


class ArchiveRestoreRow(TypedDict):
    when: str  # ISO 8601, UTC
    paths: list[str]
    by: str  # apply (a rollback brought the service back) | archive restore
    by_revision: str


class ArchiveListDocument(TypedDict):
    schema: Literal["inferfleet.archive.list/v1"]
    archive: str
    entries: list[ArchiveEntryRow]
    bytes: int


class ArchiveRestoredFile(TypedDict):
    path: str
    outcome: Literal["restored", "unchanged", "overwritten"]


class ArchiveRestoreDocument(TypedDict):
    schema: Literal["inferfleet.archive.restore/v1"]
    entry: str
    files: list[ArchiveRestoredFile]


class ArchivePruneDocument(TypedDict):
    schema: Literal["inferfleet.archive.prune/v1"]
    archive: str
    older_than: str
    cutoff: str  # ISO 8601, UTC: entries from before it are pruned
    dry_run: bool
    entries: list[str]  # pruned (or, with dry_run, that would be)
    freed_entries: int
    freed_bytes: int


# -------------------------------------------------------------------------------- doctor


class DoctorGpu(TypedDict):
    vendor: str
    index: int
    name: str
    memory: int  # bytes of dedicated memory
    bus: str
    uuid: str
    gtt: int | None  # bytes of the GTT aperture (AMD)
    unified: bool  # an APU: its budget is the GTT aperture (L-31)
    source: str


class DoctorDisk(TypedDict):
    path: str
    free: int | None
    total: int | None
    denied: NotRequired[str | None]  # a folder on the way this user may not enter


class DoctorEnvFile(TypedDict):
    path: str
    problem: str | None  # None: this user can read it; else "permission denied", "missing"


class DoctorPci(TypedDict):
    bus: str
    description: str
    gpu: bool
    atomics: list[str]


class DoctorFacts(TypedDict):
    user: str
    python: str
    gpus: list[DoctorGpu]
    gpu_source: str | None  # None: no GPU was found
    gpu_notes: list[str]
    ram: int
    available: int
    swap_total: int
    swap_free: int
    memlock: int | None  # None: unlimited
    linger: bool
    quadlet: bool
    user_systemd: bool
    podman: str | None
    subuids: int
    disks: list[DoctorDisk]
    pci: list[DoctorPci]
    gtt_params: dict[str, int]
    env_files: NotRequired[list[DoctorEnvFile]]  # env files apply reads as this user


class DoctorFinding(TypedDict):
    check: str
    severity: Literal["error", "warning", "info"]
    message: str
    where: str
    fix: str
    lesson: str | None


class DoctorHost(TypedDict):
    host: str
    local: bool
    ok: bool  # no error finding
    facts: DoctorFacts
    findings: list[DoctorFinding]
    devices_yaml: str  # a ready `devices:` block for the fleet file


class DoctorDocument(TypedDict):
    schema: Literal["inferfleet.doctor/v1"]
    ok: bool
    hosts: list[DoctorHost]


class BootstrapStep(TypedDict):
    step: str  # ssh | python | wheel | venv | checkout | linger
    status: Literal["ok", "changed", "unchanged"]
    detail: str


class BootstrapDocument(TypedDict):
    schema: Literal["inferfleet.bootstrap/v1"]
    host: str
    ok: bool  # every step done and the host's doctor found no error
    changed: bool  # False: the host was already bootstrapped at this version and revision
    version: str  # the inferfleet version the host's venv runs
    revision: str  # the commit the host's checkout is at
    steps: list[BootstrapStep]
    doctor: DoctorHost


# ---------------------------------------------------------------------------- the registry

DOCUMENT_TYPES: tuple[type, ...] = (
    ValidateDocument,
    ShowFleetDocument,
    ShowServiceDocument,
    CheckDocument,
    CheckRulesDocument,
    ExplainDocument,
    SecretsScanDocument,
    RenderDocument,
    DiffDocument,
    RuntimeDocument,
    VenvRuntimeDocument,
    RuntimesDocument,
    GGUFInspectDocument,
    BudgetDocument,
    UpDocument,
    DownDocument,
    StatusDocument,
    ProbeDocument,
    BenchDocument,
    PlanDocument,
    DeployPlanDocument,
    DeployDocument,
    ApplyDocument,
    FactsDocument,
    ModelsManifestDocument,
    ModelsVerifyDocument,
    ModelsFetchDocument,
    ArchiveListDocument,
    ArchiveRestoreDocument,
    ArchivePruneDocument,
    DoctorDocument,
    BootstrapDocument,
)


def schema_id(document: type) -> str:
    """The ``schema`` value a document type carries (``inferfleet.check/v1``)."""
    (value,) = get_args(get_type_hints(document)["schema"])
    return str(value)


def _by_id() -> dict[str, list[type]]:
    found: dict[str, list[type]] = {}
    for document in DOCUMENT_TYPES:
        found.setdefault(schema_id(document), []).append(document)
    return found


SCHEMA_IDS: tuple[str, ...] = tuple(sorted(_by_id()))


def json_schema(schema: str) -> dict[str, Any]:
    """The JSON Schema of the document ``schema`` (an id such as ``inferfleet.status/v2``).

    Objects refuse keys the type does not name, so a document that grows a key
    without its type fails validation. Documents with two shapes (``show``:
    the fleet or one service) validate against either.
    """
    types = _by_id().get(schema)
    if types is None:
        raise KeyError(f"no document type for {schema!r}; known: {', '.join(SCHEMA_IDS)}")
    target: Any = types[0] if len(types) == 1 else Union[tuple(types)]  # noqa: UP007
    doc = TypeAdapter(target).json_schema(mode="serialization")
    _close_objects(doc)
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": schema, **doc}


def _close_objects(node: Any) -> None:
    """additionalProperties: false on every object with named properties, recursively."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)
