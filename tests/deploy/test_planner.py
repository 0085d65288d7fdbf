"""The planner on real git repositories: which services a change deploys (L-40).

No hosts here: markers are written as a host would, and plans are computed
from committed revisions only.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
from deploy_repo import FleetRepo

from inferfleet.deploy import planner
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker
from inferfleet.errors import UsageError

MANIFEST = "models/big.manifest"


def manifest_text(size: int) -> str:
    return f"{size} sha256:{hashlib.sha256(str(size).encode()).hexdigest()} big.gguf\n"


def base_fleet() -> dict[str, Any]:
    llm = {"runtime": "llama", "ctx_per_slot": 4096, "bind": "127.0.0.1"}
    return {
        "version": 1,
        "hosts": {"h1": {"address": "10.0.0.1"}, "h2": {"address": "10.0.0.2"}},
        "runtimes": {
            "llama": {"kind": "llama.cpp", "binary": "/opt/llama-server"},
            "other": {"kind": "llama.cpp", "binary": "/opt/other-server"},
        },
        "models": {
            "small": {
                "source": {"path": "/models/small"},
                "files": [{"path": "s.gguf", "size": 10}],
            },
            "big": {"source": {"path": "/models/big"}, "manifest": MANIFEST},
        },  # fmt: skip
        "services": {
            "chat": {"host": "h1", "model": "small", "port": 8080, **llm},
            "coder": {
                "host": "h1",
                "model": "big",
                "port": 8081,
                "chat_template_file": "templates/coder.jinja",
                **llm,
            },
            "vision": {
                "host": "h2",
                "model": "big",
                "port": 8080,
                "runtime": "other",
                "ctx_per_slot": 4096,
                "paths": ["assets/vision/", "prompts/*.txt"],
            },
        },  # fmt: skip
    }


@pytest.fixture
def repo(tmp_path: Path) -> FleetRepo:
    repo = FleetRepo.create(tmp_path / "fleet", base_fleet(), hosts=[])
    repo.commit(
        "models, templates, assets",
        {
            MANIFEST: manifest_text(100),
            "templates/coder.jinja": "{{ messages }}\n",
            "assets/vision/palette.json": "{}\n",
            "prompts/system.txt": "be brief\n",
        },
    )
    return repo


def head_of(repo: FleetRepo) -> tuple[Repo, planner.FleetAtRevision]:
    git = Repo.containing(repo.fleet_file)
    return git, planner.fleet_at(git, git.head(), "fleet.yaml")


def deployed(at: planner.FleetAtRevision, host: str) -> dict[str, Marker]:
    """Markers as a host has them after deploying ``at``."""
    return {
        name: Marker(
            service=name,
            host=host,
            revision=at.revision,
            inputs=at.inputs[name],
            backend="process",
            bind="127.0.0.1",
            port=at.fleet.services[name].port,
            health_path="/health",
            applied_at=0.0,
            by="test",
        )
        for name in at.services_of(host)
    }


def actions(plan: planner.HostPlan) -> dict[str, str]:
    return {i.service: i.action for i in plan.items}


def test_new_services_are_planned_per_host(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    h1 = planner.plan_host("h1", at, {})
    assert [(i.service, i.action, i.new) for i in h1.items] == [
        ("chat", "deploy", True),
        ("coder", "deploy", True),
    ]
    assert actions(planner.plan_host("h2", at, {})) == {"vision": "deploy"}


def test_documentation_only_changes_plan_nothing(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1") | deployed(at, "h2")
    repo.commit("docs", {"README.md": "# our fleet\n\nHow we run it.\n", "docs/x.md": "x\n"})
    _git, after = head_of(repo)
    for host in ("h1", "h2"):
        plan = planner.plan_host(host, after, markers)
        assert all(i.action == planner.KEEP for i in plan.items), plan
        assert plan.changes() == []


def test_a_service_section_change_plans_only_that_service(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1")
    repo.data["services"]["chat"]["parallel"] = 2
    repo.commit("chat: two slots")
    _git, after = head_of(repo)
    plan = planner.plan_host("h1", after, markers)
    assert actions(plan) == {"chat": "deploy", "coder": "keep"}
    assert plan.item("chat").reasons == ["its section of the fleet file changed"]  # type: ignore[union-attr]


def test_spelling_out_a_default_changes_nothing(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1")
    repo.data["services"]["chat"]["parallel"] = 1  # the default
    repo.data["services"]["chat"]["health"] = {"path": "/health"}
    repo.commit("explicit defaults")
    _git, after = head_of(repo)
    assert planner.plan_host("h1", after, markers).changes() == []


def test_a_model_manifest_change_plans_the_services_that_serve_it(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1") | deployed(at, "h2")
    repo.commit("big: new quant", {MANIFEST: manifest_text(200)})
    _git, after = head_of(repo)
    h1 = planner.plan_host("h1", after, markers)
    assert actions(h1) == {"chat": "keep", "coder": "deploy"}
    assert h1.item("coder").reasons == [f"file {MANIFEST} changed"]  # type: ignore[union-attr]
    assert actions(planner.plan_host("h2", after, markers)) == {"vision": "deploy"}


def test_runtime_template_and_declared_paths_select_their_services(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1") | deployed(at, "h2")

    repo.commit("template", {"templates/coder.jinja": "{{ messages | tojson }}\n"})
    _git, after = head_of(repo)
    assert actions(planner.plan_host("h1", after, markers)) == {"chat": "keep", "coder": "deploy"}

    repo.data["runtimes"]["other"]["binary"] = "/opt/other-server-2"
    repo.commit("other runtime moved")
    _git, after = head_of(repo)
    h2 = planner.plan_host("h2", after, markers)
    assert h2.item("vision").reasons == ["runtime 'other' changed"]  # type: ignore[union-attr]

    markers = deployed(after, "h2")
    repo.commit("asset", {"assets/vision/palette.json": '{"a": 1}\n'})
    _git, after = head_of(repo)
    assert h2_reasons(after, markers) == ["file assets/vision/palette.json changed"]
    markers = deployed(after, "h2")
    repo.commit("new prompt", {"prompts/user.txt": "hi\n", "prompts/notes.md": "x\n"})
    _git, after = head_of(repo)
    assert h2_reasons(after, markers) == ["file prompts/user.txt added"]


def h2_reasons(at: planner.FleetAtRevision, markers: dict[str, Marker]) -> list[str]:
    item = planner.plan_host("h2", at, markers).item("vision")
    assert item is not None
    return item.reasons


def test_removed_and_moved_services_are_retired(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = deployed(at, "h1") | deployed(at, "h2")
    del repo.data["services"]["chat"]
    repo.data["services"]["coder"]["host"] = "h2"
    repo.data["services"]["coder"]["port"] = 8082
    repo.commit("chat gone, coder moves")
    _git, after = head_of(repo)
    h1 = planner.plan_host("h1", after, markers)
    assert [(i.service, i.action, i.reasons) for i in h1.items] == [
        ("chat", "retire", ["removed from the fleet"]),
        ("coder", "retire", ["moved to host h2"]),
    ]
    h2 = planner.plan_host("h2", after, markers)
    assert [(i.service, i.action) for i in h2.items] == [("coder", "deploy"), ("vision", "keep")]
    assert h2.item("coder").new  # type: ignore[union-attr]


def test_select_drain_and_explicit_services(repo: FleetRepo) -> None:
    _git, at = head_of(repo)
    markers = {"chat": deployed(at, "h1")["chat"]}
    stale = copy.deepcopy(markers["chat"].to_json())
    stale["service"] = "gone"
    markers["gone"] = Marker.from_json(stale)
    repo.data["services"]["chat"]["parallel"] = 3
    repo.commit("chat: three slots")
    _git, after = head_of(repo)
    plan = planner.plan_host("h1", after, markers)
    assert actions(plan) == {"gone": "retire", "chat": "deploy", "coder": "deploy"}
    # Default: everything the plan changes, retirements first.
    assert [i.service for i in planner.select(plan)] == ["gone", "chat", "coder"]
    # Drain: only deployed services that are behind; no new service, no retirement (L-40).
    assert [i.service for i in planner.select(plan, drain=True)] == ["chat"]
    markers = deployed(after, "h1")
    plan = planner.plan_host("h1", after, markers)
    forced = planner.select(plan, services=["coder"])
    assert [(i.service, i.action, i.reasons) for i in forced] == [
        ("coder", "deploy", ["asked for with --service"])
    ]
    with pytest.raises(UsageError, match="'vision' does not run on host 'h1'") as caught:
        planner.select(plan, services=["vision"])
    assert "chat, coder" in caught.value.hint


def test_markers_from_another_inputs_version_are_recomputed_at_their_revision(
    repo: FleetRepo,
) -> None:
    git, at = head_of(repo)
    old = deployed(at, "h1")
    legacy = {
        n: Marker.from_json({**m.to_json(), "inputs": {"version": 0}}) for n, m in old.items()
    }
    repo.data["services"]["coder"]["parallel"] = 2
    repo.commit("coder: two slots")
    _git, after = head_of(repo)

    def inputs_at(revision: str) -> dict[str, ServiceInputs] | None:
        return dict(planner.fleet_at(git, revision, "fleet.yaml").inputs)

    plan = planner.plan_host("h1", after, legacy, inputs_at=inputs_at)
    assert actions(plan) == {"chat": "keep", "coder": "deploy"}
    unknown = {
        n: Marker.from_json({**m.to_json(), "revision": "0" * 40}) for n, m in legacy.items()
    }
    plan = planner.plan_host("h1", after, unknown, inputs_at=lambda _rev: None)
    assert all("cannot be compared" in i.reasons[0] for i in plan.items)


def test_a_fleet_file_missing_at_the_revision_is_a_clear_error(repo: FleetRepo) -> None:
    git, _at = head_of(repo)
    with pytest.raises(Exception, match="other.yaml does not exist at revision") as caught:
        planner.fleet_at(git, git.head(), "other.yaml")
    assert "commit the fleet file" in caught.value.hint  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("state", "detail", "reason"),
    [
        ("stopped", "not running", "not running (its marker is current)"),
        ("stale", "recorded pid 7 is gone", "not running: recorded pid 7 is gone"),
        ("crash-looping", "system:x restarted 5 time(s)", "crash-looping: system:x restarted"),
        ("foreign", "port held by pid 9 (nc)", "another process holds its port: port held by"),
    ],
)
def test_a_kept_service_that_does_not_serve_is_deployed_with_the_reason(
    state: str, detail: str, reason: str
) -> None:
    from inferfleet.deploy.state import ServiceState

    plan = planner.HostPlan(
        "h1",
        "r" * 40,
        [
            planner.PlanItem("chat", planner.KEEP, [], "r" * 40),
            planner.PlanItem("coder", planner.KEEP, [], "r" * 40),
            planner.PlanItem("new", planner.DEPLOY, ["new service"], None),
        ],
    )
    states = {
        "chat": ServiceState("chat", state=state, detail=detail),
        "coder": ServiceState("coder", pid=5, healthy=True, state="healthy"),
        "new": ServiceState("new", state="stopped"),
    }
    found = planner.with_states(plan, states)
    chat, coder, new = found.items
    assert (chat.action, chat.recorded) == (planner.DEPLOY, "r" * 40)
    assert chat.reasons[0].startswith(reason) and chat.reasons[0].endswith(
        "(its marker is current)"
    )
    assert coder == plan.items[1] and new == plan.items[2]  # serving, or deployed anyway
    # Loading is serving soon (L-34); a held service is left down on purpose.
    loading = {**states, "chat": ServiceState("chat", pid=5, state="loading")}
    assert planner.with_states(plan, loading).items[0] == plan.items[0]
    assert planner.with_states(plan, states, held={"chat"}).items[0] == plan.items[0]
    assert planner.with_states(plan, {}).items == plan.items  # no facts: as the markers say
