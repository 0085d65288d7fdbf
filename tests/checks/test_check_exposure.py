"""L-58 (and L-55): every socket beyond loopback is behind auth or stated open; no key in a field.

Each rule through ``inferfleet check --json``: an incident fleet that trips
it, with the message naming the service (or the gateway/proxy), the field and
the fix, and the fixed fleet that passes. The JSON and SARIF outputs carry
the new rules like every other, and ``explain`` knows their ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import Patch, build
from helpers import ROOT

from inferfleet.checks.engine import catalogue
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.render.secrets import credential_in

EXPOSURE_RULES = {
    "bind-beyond-exposure",
    "lan-exposure-without-reason",
    "public-without-auth-proxy",
    "front-cannot-reach",
    "lan-exposure-loopback-bind",
    "secret-in-fleet-field",
    "router-beyond-gateway",
    "key-beyond-loopback",
}
S = "services"
LAN = {"level": "lan", "reason": "the lab's clients call it over the LAN"}
GATEWAY = {"host": "gpu", "keys_env": "/etc/inferfleet/secrets/gateway.env"}
PROXY = {
    "host": "gpu",
    "bind": "10.0.0.5",
    "port": 8443,
    "exposure": {"level": "public"},
    "keys_env": "/etc/inferfleet/secrets/proxy.env",
}
VLLM_BINARY = {"kind": "vllm", "binary": "/opt/vllm/bin/vllm"}
# A server beyond loopback requires a key from its secrets_env (key-beyond-loopback).
KEYED = {f"{S}.chat.secrets_env": "/etc/inferfleet/secrets/chat.env"}
HEALTH = "wget -q -O /dev/null http://127.0.0.1:3000/"

# rule id -> (incident, fix, field of the finding, words the message has, words the hint has)
CASES: dict[str, tuple[Patch, Patch, str, list[str], list[str]]] = {
    "bind-beyond-exposure": (
        {f"{S}.chat.bind": "0.0.0.0"},
        {f"{S}.chat.bind": "0.0.0.0", f"{S}.chat.exposure": LAN, **KEYED},
        "services.chat.bind",
        ["service 'chat'", "binds 0.0.0.0", "exposure is loopback"],
        ["bind 127.0.0.1", "level: lan, reason:"],
    ),
    "lan-exposure-without-reason": (
        {f"{S}.chat.bind": "10.0.0.5", f"{S}.chat.exposure": "lan"},
        {f"{S}.chat.bind": "10.0.0.5", f"{S}.chat.exposure": LAN, **KEYED},
        "services.chat.exposure",
        ["service 'chat'", "exposed to the LAN", "10.0.0.5", "without a stated reason"],
        ["reason:"],
    ),
    "public-without-auth-proxy": (
        {f"{S}.chat.bind": "10.0.0.5", f"{S}.chat.exposure": "public"},
        {
            f"{S}.chat.bind": "10.0.0.5",
            f"{S}.chat.exposure": "public",
            "gateway": GATEWAY,
            "proxy": PROXY,
            **KEYED,
        },  # fmt: skip
        "services.chat.exposure",
        ["service 'chat'", "is public", "no auth proxy"],
        ["declare proxy:", "proxy.services or gateway.services"],
    ),
    "front-cannot-reach": (
        {"gateway": {**GATEWAY, "host": "apu", "services": ["chat"]}},
        {"gateway": {**GATEWAY, "services": ["chat"]}},
        "gateway.services",
        ["the gateway on host 'apu'", "service 'chat' on host 'gpu'", "127.0.0.1"],
        ["run the gateway on 'gpu'", "level: lan"],
    ),
    "lan-exposure-loopback-bind": (
        {f"{S}.chat.exposure": LAN},
        {f"{S}.chat.exposure": LAN, f"{S}.chat.bind": "10.0.0.5", **KEYED},
        "services.chat.exposure",
        ["service 'chat'", "exposed to the LAN", "binds 127.0.0.1"],
        ["LAN address"],
    ),
    "router-beyond-gateway": (
        {
            f"{S}.chat.group": "swap",
            "groups": {"swap": {}},
            f"{S}.chat.bind": "10.0.0.5",
            f"{S}.chat.exposure": LAN,
        },
        {f"{S}.chat.group": "swap", "groups": {"swap": {}}, "gateway": GATEWAY},
        "services.chat.bind",
        ["service 'chat'", "swap group 'swap'", "10.0.0.5", "management routes"],
        ["bind 127.0.0.1", "through the gateway"],
    ),
    "key-beyond-loopback": (
        {f"{S}.chat.bind": "10.0.0.5", f"{S}.chat.exposure": LAN},
        {f"{S}.chat.bind": "10.0.0.5", f"{S}.chat.exposure": LAN, **KEYED},
        "services.chat.bind",
        ["service 'chat'", "10.0.0.5", "no API key"],
        ["secrets_env", "LLAMA_API_KEY=", "INFERFLEET_KEY_CHAT", "bind 127.0.0.1"],
    ),
    "secret-in-fleet-field": (
        {
            f"{S}.web.container.health_cmd": HEALTH
            + " --header 'Authorization: Bearer 9f8e7d6c5b4a'"
        },
        {f"{S}.web.container.health_cmd": HEALTH},
        "services.web.container.health_cmd",
        ["service 'web'", "key-looking value", "services.web.container.health_cmd", "9f8e…"],
        ["untracked mode-600 env file", "secrets_env"],
    ),
}


def run(cli: Any, folder: Path, patch: Patch) -> tuple[int, dict[str, Any], Path]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    result = cli("check", str(path), "--json")
    assert result.code in (0, 1), result.stderr
    return result.code, json.loads(result.stdout), path


def test_the_table_covers_every_new_rule() -> None:
    assert set(CASES) == EXPOSURE_RULES
    by_id = {r.id: r for r in catalogue()}
    assert set(by_id) >= EXPOSURE_RULES
    lessons = {rule: by_id[rule].lesson for rule in EXPOSURE_RULES}
    assert lessons == {rule: "L-55" if "secret" in rule else "L-58" for rule in EXPOSURE_RULES}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_incident_trips_the_rule_naming_field_and_fix_and_the_fix_passes(
    cli: Any, tmp_path: Path, rule_id: str
) -> None:
    incident, fix, field, said, hinted = CASES[rule_id]
    _, doc, path = run(cli, tmp_path / "incident", incident)
    hits = [f for f in doc["findings"] if f["rule"] == rule_id]
    assert len(hits) == 1, doc["findings"]
    (hit,) = hits
    assert hit["field"] == field
    for words in said:
        assert words in hit["message"], hit["message"]
    for words in hinted:
        assert words in hit["hint"], hit["hint"]
    written = path.read_text().splitlines()[hit["line"] - 1]
    assert field.split(".")[-1].split("[")[0] in written  # the line of the field
    code, fixed, _ = run(cli, tmp_path / "fix", fix)
    assert rule_id not in {f["rule"] for f in fixed["findings"]}, fixed["findings"]
    assert code == 0, fixed["findings"]


def test_a_listener_flag_in_extra_args_follows_the_exposure(cli: Any, tmp_path: Path) -> None:
    """RPC-like ports: vLLM's data-parallel address on the host's network is a bind too."""
    serve = {
        "runtimes.vbin": VLLM_BINARY,
        f"{S}.serve.runtime": "vbin",
        f"{S}.serve.backend": "systemd",
        f"{S}.serve.extra_args": ["--data-parallel-address", "10.0.0.5:13345"],
    }
    _, doc, _ = run(cli, tmp_path / "a", serve)
    (hit,) = [f for f in doc["findings"] if f["rule"] == "bind-beyond-exposure"]
    assert hit["field"] == "services.serve.extra_args"
    assert "service 'serve' listens on 10.0.0.5 through --data-parallel-address" in hit["message"]
    assert "give --data-parallel-address a loopback address" in hit["hint"]
    loopback = {**serve, f"{S}.serve.extra_args": ["--data-parallel-address=127.0.0.1"]}
    _, doc, _ = run(cli, tmp_path / "b", loopback)
    assert "bind-beyond-exposure" not in {f["rule"] for f in doc["findings"]}


def test_a_bridged_container_listens_inside_its_namespace(cli: Any, tmp_path: Path) -> None:
    """Its own --host 0.0.0.0 is the container's; only the published port (the bind) counts."""
    code, doc, _ = run(cli, tmp_path, {f"{S}.web.extra_args": ["--host", "0.0.0.0"]})
    assert code == 0, doc["findings"]


def test_the_gateway_and_the_proxy_are_judged_like_services(cli: Any, tmp_path: Path) -> None:
    wide = {"gateway": {**GATEWAY, "bind": "0.0.0.0"}}
    _, doc, _ = run(cli, tmp_path / "a", wide)
    (hit,) = [f for f in doc["findings"] if f["rule"] == "bind-beyond-exposure"]
    assert hit["field"] == "gateway.bind" and hit["service"] is None
    assert hit["message"].startswith("the gateway binds 0.0.0.0 on host 'gpu'")

    public = {"gateway": {**GATEWAY, "bind": "10.0.0.5", "exposure": "public"}}
    _, doc, _ = run(cli, tmp_path / "b", public)
    (hit,) = [f for f in doc["findings"] if f["rule"] == "public-without-auth-proxy"]
    assert hit["field"] == "gateway.exposure" and "the gateway is public" in hit["message"]
    code, doc, _ = run(cli, tmp_path / "c", {**public, "proxy": PROXY})
    assert code == 0, doc["findings"]


def test_a_proxy_that_fronts_other_services_does_not_make_this_one_public(
    cli: Any, tmp_path: Path
) -> None:
    patch = {
        f"{S}.chat.bind": "10.0.0.5",
        f"{S}.chat.exposure": "public",
        "gateway": {**GATEWAY, "services": ["serve"]},
        "proxy": PROXY,
        **KEYED,
    }
    _, doc, _ = run(cli, tmp_path / "a", patch)
    (hit,) = [f for f in doc["findings"] if f["rule"] == "public-without-auth-proxy"]
    assert "the auth proxy does not front it" in hit["message"]
    routed = {**patch, "proxy": {**PROXY, "services": ["chat"]}}
    code, doc, _ = run(cli, tmp_path / "b", routed)
    assert code == 0, doc["findings"]


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({f"{S}.chat.chat_template_kwargs": {"api_key": "abcd1234"}},
         "services.chat.chat_template_kwargs.api_key"),
        ({"gateway": {**GATEWAY, "keys_env": "sk-" + "a1" * 12}}, "gateway.keys_env"),
        ({"proxy": {**PROXY, "auth": "forward_auth", "keys_env": None,
                    "forward_auth": "https://auth.lan/outpost?token=abcdef123",
                    "outpost": "authentik"}},
         "proxy.forward_auth"),
        ({f"{S}.chat.alias": "hf_" + "A" * 30}, "services.chat.alias"),
    ],
)  # fmt: skip
def test_a_key_in_any_field_is_found_and_never_printed(
    cli: Any, tmp_path: Path, patch: Patch, field: str
) -> None:
    _, doc, path = run(cli, tmp_path, patch)
    hits = [f for f in doc["findings"] if f["rule"] == "secret-in-fleet-field"]
    assert [h["field"] for h in hits] == [field]
    secret = {"api_key": "abcd1234", "gateway.keys_env": "a1a1a1", "proxy": "abcdef123"}
    for value in secret.values():
        assert value not in json.dumps(hits)
    assert "A" * 30 not in json.dumps(hits)
    assert hits[0]["line"] is not None and path.exists()


def test_env_maps_and_extra_args_keep_their_own_rules(cli: Any, tmp_path: Path) -> None:
    """One finding per secret, from the rule that names its place (L-06, L-55)."""
    patch = {
        f"{S}.chat.env": {"AUTH_HEADER": "Bearer 9f8e7d6c5b4a3210"},
        f"{S}.chat.extra_args": ["--header", "Authorization: Bearer 9f8e7d6c5b4a3210"],
    }
    _, doc, _ = run(cli, tmp_path, patch)
    rules = sorted(f["rule"] for f in doc["findings"] if "secret" in f["rule"])
    assert rules == ["secret-in-fleet-file", "secret-on-command-line"]
    assert "9f8e7d6c5b4a3210" not in json.dumps(doc)


def test_references_to_env_files_are_not_keys(cli: Any, tmp_path: Path) -> None:
    patch = {
        f"{S}.web.container.health_cmd": HEALTH + ' --header "Authorization: Bearer ${WEB_KEY}"',
        "gateway": GATEWAY,
        "proxy": {**PROXY, "exposure": {"level": "lan", "reason": "the password manager's docs"}},
    }
    code, doc, _ = run(cli, tmp_path, patch)
    assert code == 0, doc["findings"]


def test_sarif_and_the_rule_list_carry_the_new_rules(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build({f"{S}.chat.bind": "0.0.0.0"}), sort_keys=False))
    result = cli("check", str(path), "--sarif")
    assert result.code == 1, result.stderr
    run_doc = json.loads(result.stdout)["runs"][0]
    rules = run_doc["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= EXPOSURE_RULES
    (res,) = [r for r in run_doc["results"] if r["ruleId"] == "bind-beyond-exposure"]
    assert rules[res["ruleIndex"]]["id"] == "bind-beyond-exposure"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] > 0
    listed = json.loads(cli("check", "--list", "--json").stdout)["rules"]
    assert {r["id"]: r["lesson"] for r in listed}["bind-beyond-exposure"] == "L-58"


@pytest.mark.parametrize("typed", sorted(EXPOSURE_RULES) + ["L-58", "l58"])
def test_explain_knows_the_new_ids(cli: Any, typed: str) -> None:
    result = cli("explain", typed)
    assert result.code == 0, result.stderr
    lesson = "L-55" if "secret" in typed else "L-58"
    assert lesson in result.stdout
    if typed.startswith(("L", "l")):
        assert "beyond loopback" in result.stdout and "bind-beyond-exposure" in result.stdout


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("curl -H 'Authorization: Bearer 9f8e7d6c5b4a'", "9f8e7d6c5b4a"),
        ("Bearer abcdefghijk1", "abcdefghijk1"),
        ("https://ops:hunter22@auth.lan/", "hunter22"),
        ("http://x/?api_key=abc123def", "abc123def"),
        ("MY_SERVICE_TOKEN=abcdef12", "abcdef12"),
        ('x_api_key: "1234567"', "1234567"),
        ("hf_" + "a" * 24, "hf_" + "a" * 24),
        ('curl -H "Authorization: Bearer ${WEB_KEY}"', None),
        ("password=${PW}", None),
        ("api_key: os.environ/LITELLM_KEY", None),
        ("max_tokens: 8192", None),
        ("basic configuration of the bearer service", None),
        ("the gateway on atlas reaches it over the LAN", None),
        ("SEARXNG_SECRET", None),
    ],
)
def test_what_a_key_looks_like_in_free_text(text: str, found: str | None) -> None:
    assert credential_in(text) == found


EXAMPLES = sorted((ROOT / "examples").glob("*/fleet.yaml"))


@pytest.mark.parametrize(
    "fleet", [*EXAMPLES, embedded_example()], ids=[*(p.parent.name for p in EXAMPLES), "embedded"]
)
def test_every_example_fleet_passes_check_with_its_exposures(cli: Any, fleet: Path) -> None:
    assert len(EXAMPLES) >= 2
    result = cli("check", str(fleet), "--offline", "--json")  # Hub models are illustrative
    doc = json.loads(result.stdout)
    assert result.code == 0 and doc["findings"] == [], doc["findings"]
    data = yaml.safe_load(fleet.read_text())
    for name, service in data["services"].items():
        if service.get("bind", "127.0.0.1") not in {"127.0.0.1", "::1"}:
            exposure = service.get("exposure")
            assert isinstance(exposure, dict) and exposure["reason"], name  # stated, not default


def test_a_server_that_takes_its_key_in_argv_only_stays_on_loopback(cli: Any) -> None:
    # SGLang has no key variable (its --api-key is argv, readable by every user, L-06);
    # vLLM reads VLLM_API_KEY, so its hint names that variable and the front's.
    result = cli("check", str(ROOT / "tests/fixtures/fleets/runtimes.yaml"), "--offline", "--json")
    hits = {
        f["service"]: f for f in json.loads(result.stdout)["findings"]
        if f["rule"] == "key-beyond-loopback"
    }  # fmt: skip
    assert "argv only" in hits["sg"]["message"] and "bind 127.0.0.1" in hits["sg"]["hint"]
    assert "VLLM_API_KEY=" in hits["vl"]["hint"] and "INFERFLEET_KEY_VL" in hits["vl"]["hint"]
    assert "big" not in hits  # it reads its key from its secrets_env


def test_the_exposure_policy_is_judged_once_per_check_for_all_its_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five rules report the policy's findings, one per kind; the policy runs once per check
    (every listener of the fleet), and a second check runs it again (nothing kept between)."""
    from inferfleet.checks import exposure
    from inferfleet.checks.engine import run_checks
    from inferfleet.fleetfile.loader import load_fleet

    calls: list[int] = []
    real = exposure._problems

    def counted(fleet: Any) -> Any:
        calls.append(1)
        return real(fleet)

    monkeypatch.setattr(exposure, "_problems", counted)
    loaded = load_fleet(ROOT / "examples" / "homelab" / "fleet.yaml")
    policy = [r for r in catalogue() if r.id in {rid for _k, rid, _t in exposure._POLICY}]
    assert len(policy) == 5
    first = run_checks(loaded, rules=policy)
    assert len(calls) == 1
    assert run_checks(loaded, rules=policy).findings == first.findings and len(calls) == 2
