"""The relay under hostile input and faults: it answers clearly and never stops delivering.

Every test talks to the real relay application served by uvicorn on a
loopback port (``helpers.asgi_server``) and runs real commands: the alert
recorder in this folder, or small Python programs that hang, block or
cannot be started at all.
"""

from __future__ import annotations

import contextlib
import copy
import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from helpers import free_port
from helpers.asgi_server import serving

from inferfleet.io import process
from inferfleet.relay import webhook
from inferfleet.relay.app import create_app
from inferfleet.relay.runner import CommandRunner, Delivery
from inferfleet.relay.webhook import PayloadError, parse

HERE = Path(__file__).resolve().parent
CAPTURED = json.loads((HERE / "data" / "alertmanager_webhook.json").read_text())
RECORD = [sys.executable, str(HERE / "record_alert.py")]
JSON = {"Content-Type": "application/json"}


def note(**alert_changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(CAPTURED)
    doc["alerts"][0].update(alert_changes)
    return doc


def labelled(**labels: str) -> dict[str, Any]:
    return note(labels={**CAPTURED["alerts"][0]["labels"], **labels})


def post(client: httpx.Client, doc: dict[str, Any]) -> httpx.Response:
    """POST as Alertmanager does: JSON, ASCII-escaped (so a lone surrogate survives the trip)."""
    return client.post("/alerts", content=json.dumps(doc), headers=JSON)


def recorded(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_until(what: str, predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def relay(runner: CommandRunner, **options: Any) -> Iterator[httpx.Client]:
    try:
        with serving(create_app(runner, **options)) as url, httpx.Client(base_url=url) as client:
            yield client
    finally:
        runner.close()


@pytest.fixture
def received(tmp_path: Path) -> Path:
    return tmp_path / "received.jsonl"


def test_after_every_kind_of_hostile_alert_the_next_one_is_still_delivered(
    received: Path,
) -> None:
    runner = CommandRunner([*RECORD, str(received)], timeout=30)
    with relay(runner) as client:
        # Refused at the door, with the reason: non-string values, nesting 1000 levels deep.
        answer = client.post("/alerts", json=note(labels={"alertname": "X", "n": 1}))
        assert answer.status_code == 400 and "not a map of strings" in answer.json()["error"]
        nested = json.dumps(CAPTURED)[:-1] + ', "x": ' + "[" * 1000 + "]" * 1000 + "}"
        answer = client.post("/alerts", content=nested, headers=JSON)
        assert answer.status_code == 400 and "more than 32 levels" in answer.json()["error"]

        # Accepted and delivered, each with its fault recorded against it.
        huge = {f"label_{i}": "v" * 2000 for i in range(400)}  # ~800 kB of labels
        hostile = [
            labelled(**huge),
            note(annotations={"summary": "lone surrogate \ud800 here"}),
            labelled(bytes="yes"),  # the command writes bytes that are not UTF-8
            labelled(exit="7"),
            labelled(**{"raise": "yes"}),  # the command dies of an exception
        ]
        for doc in hostile:
            assert post(client, doc).status_code == 200
        assert client.post("/alerts", json=CAPTURED).status_code == 200
        assert runner.wait_idle(120)

        history = client.get("/deliveries").json()["deliveries"]
        assert [d["returncode"] for d in history] == [0, 0, 5, 7, 1, 0]
        assert "\ufffd" in history[2]["error"] and "bad bytes" in history[2]["error"]
        assert "RuntimeError: the command blew up" in history[4]["error"]
        assert history[-1]["ok"] and history[-1]["alert"].startswith("[FIRING]")
        assert client.get("/healthz").json()["status"] == "ok"

    got = [line["env"] for line in recorded(received)]
    assert len(got) == 6
    big = got[0]
    labels = [k for k in big if k.startswith("INFERFLEET_ALERT_LABEL_")]
    assert len(labels) <= webhook.MAX_LABELS
    assert "labels" in big["INFERFLEET_ALERT_OMITTED"]
    size = sum(len(k) + len(v.encode()) + 2 for k, v in big.items())
    assert size <= webhook.MAX_ENV + webhook.MAX_VALUE
    assert got[1]["INFERFLEET_ALERT_SUMMARY"] == "lone surrogate ? here"
    assert got[-1]["INFERFLEET_ALERT_NAME"] == "InferfleetEndpointDown"


def test_a_command_that_cannot_even_start_is_recorded_and_the_worker_goes_on() -> None:
    # An argument over Linux's 128 KiB per-string limit: exec fails with E2BIG (an
    # OSError, not a FleetError), for every alert, and the relay stays up.
    runner = CommandRunner([sys.executable, "-c", "pass", "x" * 200_000], timeout=30)
    with relay(runner) as client:
        assert client.post("/alerts", json=CAPTURED).status_code == 200
        assert client.post("/alerts", json=CAPTURED).status_code == 200
        assert runner.wait_idle(60)
        history = client.get("/deliveries").json()["deliveries"]
        assert [d["returncode"] for d in history] == [None, None]
        assert "OSError" in history[0]["error"] and "Argument list too long" in history[0]["error"]
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        ("version=4&alerts=x", "application/x-www-form-urlencoded"),
        (
            json.dumps(CAPTURED),
            "text/plain",
        ),  # what a cross-site form with enctype=text/plain sends
        (json.dumps(CAPTURED), "multipart/form-data; boundary=x"),
        (json.dumps(CAPTURED), None),
    ],
)
def test_a_body_not_declared_json_is_refused_and_runs_nothing(
    received: Path, content: str, content_type: str | None
) -> None:
    runner = CommandRunner([*RECORD, str(received)])
    headers = {} if content_type is None else {"Content-Type": content_type}
    with relay(runner) as client:
        answer = client.post("/alerts", content=content, headers=headers)
        assert answer.status_code == 415
        assert "application/json" in answer.json()["error"]
        assert runner.wait_idle(5)
        assert client.get("/deliveries").json() == {"deliveries": []}
    assert not received.exists()


def test_deliveries_need_the_token_too(received: Path) -> None:
    runner = CommandRunner([*RECORD, str(received)])
    right = {"Authorization": "Bearer s3cret"}
    with relay(runner, token="s3cret") as client:
        assert client.post("/alerts", json=CAPTURED, headers=right).status_code == 200
        assert runner.wait_idle(60)
        answer = client.get("/deliveries")
        assert answer.status_code == 401 and "deliveries" not in answer.json()
        assert client.get("/deliveries", headers={"Authorization": "Bearer no"}).status_code == 401
        assert len(client.get("/deliveries", headers=right).json()["deliveries"]) == 1


def test_a_request_naming_another_host_gets_no_data_and_runs_nothing(received: Path) -> None:
    runner = CommandRunner([*RECORD, str(received)])
    evil = {"Host": "evil.example"}
    with relay(runner) as client:
        assert client.post("/alerts", json=CAPTURED).status_code == 200
        assert runner.wait_idle(60)
        answer = client.get("/deliveries", headers=evil)
        assert answer.status_code == 421
        assert "deliveries" not in answer.text and "FIRING" not in answer.text
        assert client.post("/alerts", json=CAPTURED, headers=evil).status_code == 421
        # The loopback names and any IP address are this machine; a port does not matter.
        for host in ("localhost:9099", "127.0.0.1", "[::1]:9099", "LOCALHOST."):
            assert client.get("/deliveries", headers={"Host": host}).status_code == 200
    assert len(recorded(received)) == 1
    allowed = CommandRunner([*RECORD, str(received)])
    with relay(allowed, allow_hosts=["relay.lan"]) as client:
        assert client.get("/healthz", headers={"Host": "relay.lan:9099"}).status_code == 200
        assert client.get("/healthz", headers=evil).status_code == 421


def test_a_full_queue_sheds_load_with_503_and_loses_nothing_it_accepted(tmp_path: Path) -> None:
    gate, log = tmp_path / "go", tmp_path / "ran.txt"
    wait_for_gate = (
        "import os, sys, time\n"
        "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
        "open(sys.argv[2], 'a').write(os.environ['INFERFLEET_ALERT_FINGERPRINT'] + '\\n')\n"
    )
    runner = CommandRunner(
        [sys.executable, "-c", wait_for_gate, str(gate), str(log)], timeout=60, queue_size=2
    )
    with relay(runner) as client:
        assert client.post("/alerts", json=note(fingerprint="a")).status_code == 200
        # The worker has taken "a" and waits on the gate; two more fill the queue.
        wait_until("the worker to take the first alert", lambda: runner.queued() == 0)
        two = note(fingerprint="b")
        two["alerts"].append({**two["alerts"][0], "fingerprint": "c"})
        assert client.post("/alerts", json=two).json()["queued"] == 2
        answer = client.post("/alerts", json=note(fingerprint="d"))
        assert answer.status_code == 503
        assert "2 alerts are already waiting" in answer.json()["error"]
        gate.touch()
        assert runner.wait_idle(60)
    assert log.read_text().split() == ["a", "b", "c"]


def test_healthz_goes_red_when_the_worker_is_dead(received: Path) -> None:
    def fatal(_delivery: Delivery) -> None:
        raise SystemExit("a log callback that exits")  # not an Exception: it ends the worker

    runner = CommandRunner([*RECORD, str(received)], on_delivery=fatal)
    with relay(runner) as client:
        assert client.get("/healthz").json()["status"] == "ok"
        assert client.post("/alerts", json=CAPTURED).status_code == 200
        wait_until("the worker to end", lambda: not runner.alive())
        answer = client.get("/healthz")
        assert answer.status_code == 503
        assert "SystemExit" in answer.json()["error"]
        # Nothing is accepted into a queue nobody reads: Alertmanager keeps retrying.
        refused = client.post("/alerts", json=CAPTURED)
        assert refused.status_code == 503 and "not delivering" in refused.json()["error"]
    assert len(recorded(received)) == 1


def test_a_stopped_relay_says_so_on_healthz(received: Path) -> None:
    runner = CommandRunner([*RECORD, str(received)])
    with relay(runner) as client:
        assert runner.close(grace=5)
        answer = client.get("/healthz")
        assert answer.status_code == 503 and answer.json()["error"] == "the relay is stopping"


def test_shutdown_returns_within_its_bound_while_a_command_hangs_and_the_queue_is_full(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    hang = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    runner = CommandRunner([sys.executable, "-c", hang, str(pid_file)], timeout=120, queue_size=5)
    try:
        one = parse(json.dumps(CAPTURED).encode())
        runner.submit(one)
        wait_until("the command to start", pid_file.exists)
        for _ in range(5):
            runner.submit(one)
        started = time.monotonic()
        assert runner.close(grace=1.0) is False  # the worker is still inside the command
        assert time.monotonic() - started < 3.0
        assert not runner.alive()
    finally:
        wait_until("the pid file", lambda: pid_file.exists() and pid_file.read_text(), 30)
        with contextlib.suppress(psutil.NoSuchProcess):
            # Killed by pid; not waited for here: the runner reaps its own child.
            psutil.Process(int(pid_file.read_text())).kill()
    # The command's end is recorded (killed: exit -9) and the dropped alerts never run.
    wait_until("the killed command to be recorded", lambda: len(runner.history()) == 1, 30)
    assert runner.history()[0].returncode == -9


def test_the_relay_process_stops_within_its_bound_on_sigterm_while_a_command_hangs(
    tmp_path: Path,
) -> None:
    pid_file, port = tmp_path / "pid", free_port()
    hang = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    argv = [sys.executable, "-m", "inferfleet", "relay", "serve", "--port", str(port)]
    argv += ["--timeout", "120", "--", sys.executable, "-c", hang, str(pid_file)]
    relay_proc = process.spawn_detached(argv, log_path=tmp_path / "relay.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until("the relay", lambda: _answers(f"{url}/healthz"))
        with httpx.Client(base_url=url) as client:
            for _ in range(3):
                assert post(client, CAPTURED).status_code == 200
        wait_until("the command to start", lambda: pid_file.exists() and pid_file.read_text())
        started = time.monotonic()
        relay_proc.send_signal(signal.SIGTERM)  # the relay only, not the command's group
        relay_proc.wait(30)
        assert time.monotonic() - started < 10.0
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(relay_proc, grace=5.0)
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(int(pid_file.read_text())).kill()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


# ---------------------------------------------------------------- parsing bounds


@pytest.mark.parametrize("depth", [33, 1000, 200_000])
def test_deep_nesting_is_refused_before_the_json_decoder_sees_it(depth: int) -> None:
    body = json.dumps(CAPTURED)[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(PayloadError, match="more than 32 levels deep"):
        parse(body.encode())


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    summary = '[{"' * 500 + '\\"[[' * 100
    doc = note(annotations={"summary": summary})
    assert parse(json.dumps(doc).encode()).alerts[0].annotations["summary"] == summary
    assert webhook.nesting_depth(json.dumps(doc).encode(), 32) == 4
