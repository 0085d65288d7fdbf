"""L-54 on the host: ``apply`` renders a service's settings files from their templates.

No manual ``render-settings`` step: the rendered content's digest is a fact
next to the installed file's, a difference writes the file (atomic, mode
600) and re-applies the service, the same content is reported unchanged and
restarts nothing, and a template that does not render fails that service
before anything is touched, leaving the old settings file as it was.
A local host, the fake runtime and a tiny verified model; the state dir and
the settings destination are the test's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_repo import FleetRepo, local_fleet, stop_recorded

pytestmark = pytest.mark.slow

TEMPLATE = 'api_key: "${API_KEY}"\nendpoint: "${ENDPOINT}"\n'


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "etc" / "web" / "settings.yml"


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    path = tmp_path / "private" / "web.env"
    path.parent.mkdir()
    path.write_text("API_KEY=sk-first-0123456789\nENDPOINT=http://127.0.0.1:9/v1\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def repo(
    tmp_path: Path,
    port: int,
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    _isolated_state: Path,
    dest: Path,
    secrets: Path,
) -> Iterator[FleetRepo]:
    settings = {
        "template": "settings/web.yml",
        "dest": str(dest),
        "allow": ["API_KEY", "ENDPOINT"],
        "env_files": [str(secrets)],
    }
    runtime = {"kind": "llama.cpp", "binary": str(fake_runtime)}
    data = local_fleet(runtime, tiny_model, port, settings=[settings])
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.commit("the settings template", {"settings/web.yml": TEMPLATE})
    repo.states = {"here": _isolated_state}
    yield repo
    stop_recorded(_isolated_state)


def apply(cli: Any, repo: FleetRepo, *args: str) -> Any:
    """``apply --events``: the JSON lines deploy reads; returns (result, events)."""
    result = cli("apply", "--file", str(repo.fleet_file), "--events", *args)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return result, events


def settings_steps(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["path"], e["status"])
        for e in events
        if e.get("event") == "step" and e.get("kind") == "settings"
    ]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events if e.get("event") == "step"]


def outcome(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    done = events[-1]["result"]["done"]
    return [(d["service"], d["outcome"]) for d in done]


def pid_of(repo: FleetRepo) -> int:
    record = repo.record("here", "a")
    assert record is not None
    return int(record["pid"])


def test_apply_renders_settings_and_restarts_only_when_they_change(
    cli, repo: FleetRepo, dest: Path, secrets: Path, port: int
) -> None:
    """L-54: rendered at deploy time from the host's env file, mode 600, no manual step."""
    result, events = apply(cli, repo)
    assert result.code == 0, result.stderr
    assert outcome(events) == [("a", "deployed")]
    assert settings_steps(events) == [(str(dest), "new")]
    assert "write-settings" in kinds(events)
    assert dest.read_text() == 'api_key: "sk-first-0123456789"\nendpoint: "http://127.0.0.1:9/v1"\n'
    assert dest.stat().st_mode & 0o777 == 0o600
    assert "sk-first" not in result.stdout  # the events name the file, never its content
    pid = pid_of(repo)

    # The same content: unchanged, nothing written, not restarted.
    written = dest.stat().st_mtime_ns
    result, events = apply(cli, repo, "--service", "a")
    assert result.code == 0, result.stderr
    assert outcome(events) == [("a", "kept")]
    assert settings_steps(events) == [(str(dest), "unchanged")]
    assert "write-settings" not in kinds(events) and "stop" not in kinds(events)
    assert pid_of(repo) == pid and dest.stat().st_mtime_ns == written

    # A template change is an input of the service: the plan picks it, the file is
    # rewritten and the service restarted on it.
    repo.commit("settings: a new key", {"settings/web.yml": TEMPLATE + "retries: 3\n"})
    result, events = apply(cli, repo)
    assert result.code == 0, result.stderr
    assert outcome(events) == [("a", "deployed")]
    assert settings_steps(events) == [(str(dest), "changed")]
    assert kinds(events).index("stop") < kinds(events).index("write-settings")
    assert kinds(events).index("write-settings") < kinds(events).index("start")
    assert dest.read_text().endswith("retries: 3\n") and dest.stat().st_mode & 0o777 == 0o600
    assert pid_of(repo) != pid
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200

    # A rotated secret (the env file on the host, nothing committed) changes the
    # rendered content: re-applying the service writes it and restarts.
    pid = pid_of(repo)
    secrets.write_text("API_KEY=sk-second-9876543210\nENDPOINT=http://127.0.0.1:9/v1\n")
    result, events = apply(cli, repo, "--service", "a")
    assert result.code == 0, result.stderr
    assert settings_steps(events) == [(str(dest), "changed")]
    assert 'api_key: "sk-second-9876543210"' in dest.read_text()
    assert pid_of(repo) != pid

    # A file loosened by hand is made owner-only again, without a restart.
    pid = pid_of(repo)
    dest.chmod(0o644)
    result, events = apply(cli, repo, "--service", "a")
    assert result.code == 0 and settings_steps(events) == [(str(dest), "unchanged")]
    assert dest.stat().st_mode & 0o777 == 0o600 and pid_of(repo) == pid


def test_a_dry_run_reports_the_settings_and_writes_nothing(
    cli, repo: FleetRepo, dest: Path
) -> None:
    result, events = apply(cli, repo, "--dry-run")
    assert result.code == 0, result.stderr
    assert settings_steps(events) == [(str(dest), "new")]
    actions = [a["kind"] for a in events[-1]["result"]["actions"]]
    assert "write-settings" in actions
    assert not dest.exists() and repo.record("here", "a") is None


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ('api_key: "${API_KEY"\n', "malformed placeholder '${API_KEY\"'"),
        ('token: "${TOKEN}"\n', "placeholder(s) TOKEN are not in the allowlist"),
    ],
)
def test_a_template_that_does_not_render_fails_the_service_and_keeps_the_old_file(
    cli, repo: FleetRepo, dest: Path, port: int, template: str, message: str
) -> None:
    assert apply(cli, repo)[0].code == 0
    before = dest.read_text()
    pid = pid_of(repo)
    marker = repo.marker("here", "a")
    repo.commit("settings: broken", {"settings/web.yml": template})
    result, events = apply(cli, repo)
    assert result.code == 1
    failed = events[-1]["result"]["failed"]
    assert failed["service"] == "a" and failed["error"] == "SettingsError"
    assert message in failed["message"]
    assert failed["where"] == "services.a.settings[0]" and failed["hint"]
    assert dest.read_text() == before and dest.stat().st_mode & 0o777 == 0o600
    assert pid_of(repo) == pid and repo.marker("here", "a") == marker
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    leftovers = [p.name for p in dest.parent.iterdir() if p != dest]
    assert leftovers == []


def test_a_missing_env_file_fails_before_anything_starts(
    cli, repo: FleetRepo, dest: Path, secrets: Path, port: int
) -> None:
    secrets.unlink()
    result = cli("apply", "--file", str(repo.fleet_file))
    assert result.code == 1
    err = " ".join(result.stderr.split())
    assert "cannot read env file" in err and str(secrets) in err
    assert "Traceback" not in result.stderr
    assert not dest.exists() and repo.record("here", "a") is None
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)


def test_a_destination_inside_the_checkout_is_refused(cli, repo: FleetRepo, port: int) -> None:
    inside = repo.fleet_file.parent / "private" / "rendered.yml"
    repo.data["services"]["a"]["settings"][0]["dest"] = str(inside)
    repo.commit("settings rendered into the repo")
    result = cli("apply", "--file", str(repo.fleet_file))
    assert result.code == 1
    assert "refusing to render settings inside the checkout" in " ".join(result.stderr.split())
    assert not inside.exists() and repo.record("here", "a") is None


def test_render_settings_uses_the_same_rendering(
    cli, repo: FleetRepo, dest: Path, tmp_path: Path
) -> None:
    """The manual command stays, and writes exactly what apply would."""
    staged = tmp_path / "staging"
    result = cli("render-settings", "a", "--file", str(repo.fleet_file), "--dest-root", str(staged))
    assert result.code == 0, result.stderr
    manual = staged / str(dest).lstrip("/")
    assert manual.stat().st_mode & 0o777 == 0o600
    assert apply(cli, repo)[0].code == 0
    assert manual.read_text() == dest.read_text()


def test_two_settings_files_with_one_destination_are_refused(cli, repo: FleetRepo) -> None:
    entry = repo.data["services"]["a"]["settings"][0]
    repo.data["services"]["a"]["settings"].append(dict(entry))
    repo.commit("the same settings file twice")
    result = cli("apply", "--file", str(repo.fleet_file))
    assert result.code == 1
    err = " ".join(result.stderr.split())
    assert "is also the destination of services.a.settings[0]" in err
    assert "services.a.settings[1]" in err and repo.record("here", "a") is None
