"""The exposure, gateway and proxy fields (L-58): validated, bounded, refused with line and fix.

Written as a word or a mapping with the reason; a reason is one bounded line
of plain text (no control characters: it is shown in findings and documents);
the gateway and proxy name hosts and services that exist, take their keys
from env files only, and share the port space of the services they sit next
to. The JSON Schema ``inferfleet schema`` prints accepts both spellings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from check_helpers import Patch, build

from inferfleet.fleetfile.exposure import MAX_REASON, Exposure
from inferfleet.fleetfile.loader import load_fleet

S = "services"
GATEWAY = {"host": "gpu", "keys_env": "/etc/inferfleet/secrets/gateway.env"}
PROXY = {
    "host": "gpu",
    "bind": "10.0.0.5",
    "exposure": {"level": "lan", "reason": "the household's clients"},
    "keys_env": "/etc/inferfleet/secrets/proxy.env",
}


def validate(cli: Any, tmp_path: Path, patch: Patch) -> tuple[int, str, Path]:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    result = cli("validate", str(path))
    return result.code, " ".join(result.stderr.split()), path


def line_of(path: Path, text: str) -> int:
    """The last line holding ``text`` (the gateway and proxy come after the services)."""
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_word_and_a_mapping_are_one_exposure(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    patch = {f"{S}.chat.exposure": "public", f"{S}.serve.exposure": {"level": "lan",
             "reason": "the lab's clients"}}  # fmt: skip
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    fleet = load_fleet(path).fleet
    assert fleet.services["chat"].exposure == Exposure(level="public")
    assert fleet.services["serve"].exposure.reason == "the lab's clients"
    assert fleet.services["web"].exposure == Exposure()  # the default: loopback
    assert fleet.services["web"].exposure.level == "loopback"


@pytest.mark.parametrize(
    ("patch", "anchor", "words"),
    [
        ({f"{S}.chat.exposure": "internet"}, "exposure: internet",
         "Input should be 'loopback', 'lan' or 'public'"),
        ({f"{S}.chat.exposure": {"level": "lan", "reason": "ok\nExecStartPre=/bin/sh"}},
         "reason:", "control character (U+000A line feed)"),
        ({f"{S}.chat.exposure": {"level": "lan", "reason": "x" * (MAX_REASON + 1)}},
         "reason:", f"at most {MAX_REASON}"),
        ({f"{S}.chat.exposure": {"level": "lan", "reason": "   "}}, "reason:", "blank"),
        ({f"{S}.chat.exposure": {"level": "lan", "why": "typo"}}, "why: typo", "why"),
        ({"gateway": {**GATEWAY, "host": "nas"}}, "host: nas", "not in hosts"),
        ({"gateway": {**GATEWAY, "services": ["web"]}}, "- web",
         "the gateway fronts 'web', which is not one of the fleet's llm services"),
        ({"gateway": {**GATEWAY, "services": ["chat"], "timeouts": {"serve": "30m"}}},
         "serve: 30m", "timeout for 'serve', which it does not front"),
        ({"gateway": {"host": "gpu"}}, "gateway:", "keys_env"),
        ({"gateway": {**GATEWAY, "bind": "gateway.lan"}}, "bind: gateway.lan",
         "bind must be an IP address"),
        ({"gateway": {**GATEWAY, "port": 8080}}, "port: 8080",
         "port 8080 on host 'gpu' is already used by service 'chat'"),
        ({"proxy": {**PROXY, "keys_env": None}}, "proxy:", "bearer auth needs keys_env"),
        ({"proxy": {**PROXY, "auth": "forward_auth"}}, "proxy:", "needs the outpost URL"),
        ({"proxy": {**PROXY, "auth": "forward_auth",
                    "forward_auth": "https://admin:hunter22@auth.lan/"}},
         "forward_auth:", "must not carry credentials"),
        ({"proxy": {**PROXY, "tls": "acme"}}, "proxy:", "acme certificates need the DNS names"),
        ({"proxy": {**PROXY, "names": ["-bad-.example"]}}, "-bad-.example", "not a DNS name"),
        ({"proxy": {**PROXY, "exposure": "loopback"}}, "proxy:",
         "an auth proxy exists to be reached from the network"),
        ({"proxy": {**PROXY, "services": ["nope"]}}, "- nope", "fronts 'nope'"),
    ],
)  # fmt: skip
def test_bad_fields_are_refused_with_line_and_fix(
    cli: Any, tmp_path: Path, patch: Patch, anchor: str, words: str
) -> None:
    code, err, path = validate(cli, tmp_path, patch)
    assert code == 2, err
    assert words in err, err
    assert f"{path}:{line_of(path, anchor)}:" in err, err
    assert "Traceback" not in err


def test_the_reason_with_a_control_character_never_reaches_an_output(
    cli: Any, tmp_path: Path
) -> None:
    patch = {f"{S}.chat.exposure": {"level": "lan", "reason": "a\x1b[31mred"}}
    code, err, _ = validate(cli, tmp_path, patch)
    assert code == 2 and "\x1b" not in err and "U+001B" in err


def test_a_valid_front_door_loads(cli: Any, tmp_path: Path) -> None:
    patch = {
        "gateway": {**GATEWAY, "services": ["chat"], "timeout": "20m",
                    "timeouts": {"chat": "1h"}},
        "proxy": {**PROXY, "tls": "acme", "names": ["ai.example.org"], "services": ["web"]},
    }  # fmt: skip
    code, err, path = validate(cli, tmp_path, patch)
    assert code == 0, err
    fleet = load_fleet(path).fleet
    assert fleet.gateway is not None and fleet.gateway.timeouts == {"chat": 3600.0}
    assert fleet.gateway.bind == "127.0.0.1" and fleet.gateway.exposure.level == "loopback"
    assert fleet.proxy is not None and fleet.proxy.port == 443


def test_the_json_schema_takes_both_spellings(cli: Any) -> None:
    schema = json.loads(cli("schema").stdout)
    for exposure in ("lan", {"level": "lan", "reason": "the lab"}):
        data = build({f"{S}.chat.exposure": exposure, "gateway": GATEWAY, "proxy": PROXY})
        jsonschema.validate(data, schema)
    bad = build({f"{S}.chat.exposure": "internet"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
