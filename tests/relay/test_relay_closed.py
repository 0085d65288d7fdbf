"""The relay is closed by default (L-58) and its log shows alert text inertly.

Beyond loopback, whoever reaches the port runs the alert command with text
of their choosing: ``relay serve --bind 0.0.0.0`` without ``--token-file``
is refused (exit 2, nothing listens) unless ``--insecure-no-token`` says so.
Alert text reaches the relay's log: a terminal escape or a line break in it
is shown as an escape, never acted on or read as a log line of its own.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from helpers import free_port
from test_relay_hardening import CAPTURED, RECORD, _answers, labelled, post, recorded, wait_until

from inferfleet.io import process


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "10.250.0.1", "relay.example.org"])
def test_binding_beyond_loopback_without_a_token_is_refused(
    cli: Callable[..., Any], bind: str
) -> None:
    port = free_port()
    result = cli("relay", "serve", "--bind", bind, "--port", str(port), "--", sys.executable)
    assert result.code == 2, result
    assert "reaches beyond this host" in result.stderr and "--token-file" in result.stderr
    assert "--insecure-no-token" in result.stderr and "Traceback" not in result.stderr
    with socket.socket() as probe:  # nothing was left listening
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_control_characters_in_alert_text_are_escaped_in_the_log(tmp_path: Path) -> None:
    received, port, log = tmp_path / "received.jsonl", free_port(), tmp_path / "relay.log"
    argv = [sys.executable, "-m", "inferfleet", "relay", "serve", "--port", str(port)]
    relay_proc = process.spawn_detached([*argv, "--", *RECORD, str(received)], log_path=log)
    url = f"http://127.0.0.1:{port}"
    forged = "Down\x1b[2J\x1b]0;owned\x07\nrelay: FakeAlert -> ok in 0.00s\u202e"
    try:
        wait_until("the relay", lambda: _answers(f"{url}/healthz"))
        with httpx.Client(base_url=url) as client:
            assert post(client, labelled(alertname=forged)).status_code == 200
            assert post(client, CAPTURED).status_code == 200
        wait_until("both deliveries", lambda: len(recorded(received)) == 2)
        # Three arrows: the two deliveries' and the one inside the forged text.
        wait_until("both log lines", lambda: log.read_text().count(" -> ") == 3)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(relay_proc, grace=5.0)
    text = log.read_text()
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "Down\\x1b[2J\\x1b]0;owned\\x07\\x0arelay: FakeAlert" in text
    assert "\\u202e" in text
    # Every line the relay wrote is one of its own: the forged one is not a line.
    assert not any(line.startswith("relay: FakeAlert") for line in text.splitlines())
