"""The relay: Alertmanager's webhook in, the user's command run per alert, never via a shell."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from inferfleet.relay import webhook
from inferfleet.relay.app import create_app
from inferfleet.relay.runner import CommandRunner
from inferfleet.relay.webhook import PayloadError, parse

HERE = Path(__file__).resolve().parent
CAPTURED = json.loads((HERE / "data" / "alertmanager_webhook.json").read_text())
LOCAL = "http://localhost"  # the relay answers only names of this machine (HostCheck)
JSON = {"Content-Type": "application/json"}


def payload(**alert_changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(CAPTURED)
    doc["alerts"][0].update(alert_changes)
    return doc


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def received(tmp_path: Path) -> Path:
    return tmp_path / "received.jsonl"


@pytest.fixture
def relay(received: Path) -> Iterator[tuple[TestClient, CommandRunner]]:
    runner = CommandRunner(
        [sys.executable, str(HERE / "record_alert.py"), str(received)], timeout=30
    )
    try:
        with TestClient(create_app(runner), base_url=LOCAL) as client:
            yield client, runner
    finally:
        runner.close()


def test_the_captured_alertmanager_notification_parses() -> None:
    note = parse(json.dumps(CAPTURED).encode())
    assert (note.receiver, note.status, note.truncated) == ("inferfleet-relay", "firing", 0)
    [alert] = note.alerts
    assert alert.name == "InferfleetEndpointDown"
    assert alert.fingerprint == "1c20b100a6fe478a"
    assert alert.text() == (
        "[FIRING] InferfleetEndpointDown gemma@local: gemma on local is not answering /metrics"
    )


def test_every_field_reaches_the_command_as_an_environment_variable() -> None:
    note = parse(json.dumps(CAPTURED).encode())
    env = webhook.environment(note.alerts[0], note)
    assert env["INFERFLEET_ALERT_NAME"] == "InferfleetEndpointDown"
    assert env["INFERFLEET_ALERT_SEVERITY"] == "critical"
    assert env["INFERFLEET_ALERT_INSTANCE"] == "127.0.0.1:18992"
    assert env["INFERFLEET_ALERT_STARTS_AT"] == "2026-12-02T16:29:58.277Z"
    assert env["INFERFLEET_ALERT_LABEL_JOB"] == "inferfleet-gemma"
    assert "L-56" in env["INFERFLEET_ALERT_DESCRIPTION"]
    assert json.loads(env["INFERFLEET_ALERT_JSON"])["fingerprint"] == "1c20b100a6fe478a"


def test_label_names_become_safe_variable_names_and_values_lose_nul_bytes() -> None:
    doc = payload(labels={"alertname": "X", "odd-label.name": "a\0b"})
    note = parse(json.dumps(doc).encode())
    env = webhook.environment(note.alerts[0], note)
    assert env["INFERFLEET_ALERT_LABEL_ODD_LABEL_NAME"] == "ab"


def test_a_huge_alert_keeps_its_fields_but_not_an_oversized_json_variable() -> None:
    doc = payload(annotations={"summary": "s", "description": "x" * 200_000})
    note = parse(json.dumps(doc).encode())
    env = webhook.environment(note.alerts[0], note)
    assert len(env["INFERFLEET_ALERT_DESCRIPTION"]) == webhook.MAX_VALUE
    assert "INFERFLEET_ALERT_JSON" not in env
    assert "characters" in env["INFERFLEET_ALERT_JSON_OMITTED"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (json.dumps({**CAPTURED, "version": "3"}).encode(), "webhook version '3' is not 4"),
        (json.dumps({**CAPTURED, "alerts": {}}).encode(), "no alerts list"),
        (json.dumps(payload(status="pending")).encode(), "status 'pending'"),
        (json.dumps(payload(labels={"a": 1})).encode(), "labels are not a map of strings"),
        (json.dumps({**CAPTURED, "alerts": ["x"]}).encode(), "alert 0 is not an object"),
    ],
)
def test_bodies_that_are_not_notifications(body: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        parse(body)


def test_a_notification_runs_the_command_once_per_alert(
    relay: tuple[TestClient, CommandRunner], received: Path
) -> None:
    client, runner = relay
    doc = copy.deepcopy(CAPTURED)
    second = copy.deepcopy(doc["alerts"][0])
    second["labels"]["service"] = "coder"
    second["status"] = "resolved"
    doc["alerts"].append(second)
    answer = client.post("/alerts", json=doc)
    assert answer.status_code == 200 and answer.json() == {"queued": 2, "truncated": 0}
    assert runner.wait_idle(60)
    got = [line["env"] for line in lines(received)]
    assert [(e["INFERFLEET_ALERT_SERVICE"], e["INFERFLEET_ALERT_STATUS"]) for e in got] == [
        ("gemma", "firing"),
        ("coder", "resolved"),
    ]
    history = client.get("/deliveries").json()["deliveries"]
    assert [d["ok"] for d in history] == [True, True]


def test_alert_text_is_never_run_by_a_shell(
    relay: tuple[TestClient, CommandRunner], received: Path, tmp_path: Path
) -> None:
    client, runner = relay
    evil = f"$(touch {tmp_path}/pwned); touch {tmp_path}/pwned2 `touch {tmp_path}/pwned3`"
    answer = client.post("/alerts", json=payload(annotations={"summary": evil}))
    assert answer.status_code == 200
    assert runner.wait_idle(60)
    assert lines(received)[0]["env"]["INFERFLEET_ALERT_SUMMARY"] == evil
    assert lines(received)[0]["argv"] == []  # nothing from the alert lands in argv
    assert not list(tmp_path.glob("pwned*"))


def test_a_bad_body_is_refused_with_its_reason_and_runs_nothing(
    relay: tuple[TestClient, CommandRunner], received: Path
) -> None:
    client, runner = relay
    body = b'{"version": "4", "alerts": [{"status": 1}]}'
    answer = client.post("/alerts", content=body, headers=JSON)
    assert answer.status_code == 400
    assert "alert 0 has status 1" in answer.json()["error"]
    assert runner.wait_idle(5) and not received.exists()
    assert client.get("/deliveries").json() == {"deliveries": []}


def test_an_oversized_body_is_refused_unread(
    relay: tuple[TestClient, CommandRunner], received: Path
) -> None:
    client, _runner = relay
    answer = client.post("/alerts", content=b"x" * (webhook.MAX_BODY + 1), headers=JSON)
    assert answer.status_code == 413
    assert not received.exists()


def test_a_failing_command_is_recorded_with_its_exit_code_and_output(
    relay: tuple[TestClient, CommandRunner],
) -> None:
    client, runner = relay
    labels = {**CAPTURED["alerts"][0]["labels"], "exit": "3"}
    assert client.post("/alerts", json=payload(labels=labels)).status_code == 200
    assert runner.wait_idle(60)
    [delivery] = client.get("/deliveries").json()["deliveries"]
    assert (delivery["ok"], delivery["returncode"]) == (False, 3)
    assert "told to fail" in delivery["error"]


def test_a_hanging_command_is_stopped_at_its_timeout_and_the_next_alert_still_runs(
    tmp_path: Path,
) -> None:
    runner = CommandRunner([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1.0)
    try:
        note = parse(json.dumps(CAPTURED).encode())
        runner.submit(note)
        runner.submit(note)
        assert runner.wait_idle(30)
        history = runner.history()
        assert [d.returncode for d in history] == [None, None]
        assert "did not finish within 1 s" in history[0].error
    finally:
        runner.close()


def test_a_bearer_token_is_required_when_configured(received: Path) -> None:
    runner = CommandRunner([sys.executable, str(HERE / "record_alert.py"), str(received)])
    try:
        with TestClient(create_app(runner, token="s3cret"), base_url=LOCAL) as client:
            assert client.post("/alerts", json=CAPTURED).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert client.post("/alerts", json=CAPTURED, headers=wrong).status_code == 401
            right = {"Authorization": "Bearer s3cret"}
            assert client.post("/alerts", json=CAPTURED, headers=right).status_code == 200
            assert runner.wait_idle(60)
    finally:
        runner.close()
    assert len(lines(received)) == 1


# ---------------------------------------------------------------- the CLI


@pytest.fixture
def cli_relay(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """The real entry point (`relay` is in app.py's verb registry)."""
    return cli


def test_relay_config_renders_what_amtool_accepts(
    cli_relay: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "am" / "alertmanager.yml"
    result = cli_relay("relay", "config", "--url", "http://10.0.0.5:9099/alerts", "--out", str(out))
    assert result.code == 0, result.stderr
    text = out.read_text()
    assert "url: http://10.0.0.5:9099/alerts" in text and "send_resolved: true" in text
    checked = subprocess.run(
        ["/usr/bin/amtool", "check-config", str(out)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://x/alerts"], "is not an http(s) URL"),
        (["--group-wait", "soon"], "group_wait 'soon' is not an Alertmanager duration"),
    ],
)
def test_relay_config_refuses_bad_values_and_writes_nothing(
    cli_relay: Callable[..., Any], tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "alertmanager.yml"
    result = cli_relay("relay", "config", *args, "--out", str(out))
    assert result.code == 2
    assert message in result.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_relay_serve_refuses_a_missing_command(cli_relay: Callable[..., Any]) -> None:
    result = cli_relay("relay", "serve", "--port", "0")
    assert result.code == 2 and "no command to run for each alert" in result.stderr
    result = cli_relay("relay", "serve", "--port", "0", "--", "no-such-program-xyz")
    assert result.code == 2
    assert "'no-such-program-xyz' is not an executable program" in result.stderr
    assert "shell syntax is not run" in result.stderr


def test_relay_serve_refuses_a_token_file_others_can_read(
    cli_relay: Callable[..., Any], tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o644)
    result = cli_relay(
        "relay", "serve", "--port", "0", "--token-file", str(token), "--", sys.executable
    )
    assert result.code == 2
    assert "can be read by other users (mode 0644)" in result.stderr
    assert f"chmod 600 {token}" in result.stderr
