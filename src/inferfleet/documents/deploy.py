"""Documents of ``plan``, ``deploy``, ``apply`` and a host's facts."""

from __future__ import annotations

from typing import (
    Any,
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


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
    # Bytes in use per device there (nvidia:0, amd:1, ram), read with the states.
    memory: NotRequired[dict[str, int]]
    # The auth proxy's local CA root (PEM, tls internal) when the proxy runs there.
    proxy_root: NotRequired[str]
