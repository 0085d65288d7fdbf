"""The relay's token goes where every credential may go: https, or plain http to loopback.

Alertmanager sends the token of ``credentials_file`` with every alert; a
webhook URL in plain http to another machine would put it on the LAN in
clear. ``relay config`` refuses that (exit 2, naming ``--url``) and writes
nothing; https and loopback URLs are rendered with the token file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helpers.cli import CliResult

Cli = Callable[..., CliResult]


@pytest.mark.parametrize(
    "url", ["http://10.0.0.5:9099/alerts", "http://relay.lan:9099/alerts", "http://[fd00::5]/a"]
)
def test_a_token_over_plain_http_to_the_lan_is_refused(cli: Cli, tmp_path: Path, url: str) -> None:
    out = tmp_path / "alertmanager.yml"
    result = cli(
        "relay", "config", "--url", url, "--token-file", "/etc/relay.token", "--out", str(out)
    )
    assert result.code == 2, result.stdout + result.stderr
    assert "--url" in result.stderr and "in clear" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9099/alerts", "https://relay.lan/alerts", "http://10.0.0.5/alerts"]
)
def test_https_loopback_or_no_token_are_rendered(cli: Cli, tmp_path: Path, url: str) -> None:
    out = tmp_path / "alertmanager.yml"
    token = [] if url.startswith("http://10.") else ["--token-file", "/etc/relay.token"]
    result = cli("relay", "config", "--url", url, *token, "--out", str(out))
    assert result.code == 0, result.stderr
    [hook] = yaml.safe_load(out.read_text())["receivers"][0]["webhook_configs"]
    assert hook["url"] == url
    assert ("http_config" in hook) == bool(token)
