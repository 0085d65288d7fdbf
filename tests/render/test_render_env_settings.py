"""Env files (no secrets, no runtime-owned names) and the settings renderer (L-54)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from render_helpers import ROOT

from inferfleet.cli.render_files import write_settings
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Service
from inferfleet.render.envfile import EnvFileError, env_file
from inferfleet.render.settings import SettingsError, read_env_files, render_settings


def service(**fields: object) -> Service:
    return Service.model_validate(
        {"host": "h", "kind": "container", "image": "x", "port": 1, **fields}
    )


def test_env_file_lists_tunables_then_runtime_variables() -> None:
    text = env_file(
        "s", service(env={"B": "2", "A": "1 x"}, runtime_env={"HIP_VISIBLE_DEVICES": "0"})
    )
    assert text.splitlines()[1:] == ["A=1 x", "B=2", "HIP_VISIBLE_DEVICES=0"]


@pytest.mark.parametrize("name", ["TEMP", "HOST", "GPU_MAX_HEAP_SIZE", "LLAMA_ARG_CTX_SIZE"])
def test_env_file_refuses_names_the_runtime_reads(name: str) -> None:
    """L-24: TEMP=1.0 exported from an env file made every HIP load segfault."""
    with pytest.raises(EnvFileError, match="L-24"):
        env_file("s", service(env={name: "1.0"}))


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"HF_TOKEN": "x"}, "L-55"),
        ({"NOTE": "hf_" + "a" * 30}, "L-55"),
    ],
)
def test_env_file_refuses_secrets(env: dict[str, str], match: str) -> None:
    with pytest.raises(EnvFileError, match=match):
        env_file("s", service(env=env))


@pytest.mark.parametrize("value", ['say "hi"', "$HOME/x", " padded", "a\\b", "`id`"])
def test_schema_refuses_values_systemd_and_podman_read_differently(value: str) -> None:
    # Refused where the fleet file is read, so the loader can name the line.
    with pytest.raises(ValidationError, match="read differently"):
        service(env={"Q": value})
    with pytest.raises(ValidationError, match="read differently"):
        service(runtime_env={"Q": value})


TEMPLATE = 'server:\n  secret_key: "${SEARXNG_SECRET}"\n  base: ${BASE}\n'


def test_settings_render_from_env_files(tmp_path: Path) -> None:
    env = tmp_path / "search.env"
    env.write_text("# untracked\nexport SEARXNG_SECRET='s3cr3t value'\nBASE=http://x/\n")
    values = read_env_files([env])
    text = render_settings(TEMPLATE, ["SEARXNG_SECRET", "BASE"], values, where="t")
    assert text == 'server:\n  secret_key: "s3cr3t value"\n  base: http://x/\n'


def test_unresolved_placeholder_fails_loudly() -> None:
    with pytest.raises(SettingsError, match="unresolved placeholder.*BASE"):
        render_settings(TEMPLATE, ["SEARXNG_SECRET", "BASE"], {"SEARXNG_SECRET": "x"}, where="t")


def test_name_outside_the_allowlist_fails() -> None:
    values = {"SEARXNG_SECRET": "x", "BASE": "y"}
    with pytest.raises(SettingsError, match="BASE are not in the allowlist"):
        render_settings(TEMPLATE, ["SEARXNG_SECRET"], values, where="t")


def test_malformed_placeholder_fails() -> None:
    with pytest.raises(SettingsError, match="malformed placeholder"):
        render_settings("a: ${not closed\n", [], {}, where="t")


def test_rerender_is_idempotent_and_values_stay_literal(tmp_path: Path) -> None:
    values = {"SEARXNG_SECRET": "${BASE}", "BASE": "http://x/"}
    once = render_settings(TEMPLATE, ["SEARXNG_SECRET", "BASE"], values, where="t")
    assert 'secret_key: "${BASE}"' in once  # a value is never expanded again
    dest = tmp_path / "etc" / "settings.yml"
    repo = tmp_path / "repo"
    repo.mkdir()
    assert write_settings(dest, once, repo_root=repo, service="searxng") is True
    first = dest.stat()
    again = render_settings(TEMPLATE, ["SEARXNG_SECRET", "BASE"], values, where="t")
    assert again == once
    assert (
        write_settings(dest, again, repo_root=repo, service="searxng") is False
    )  # unchanged: not rewritten
    assert dest.stat().st_mtime_ns == first.st_mtime_ns
    assert oct(dest.stat().st_mode & 0o777) == "0o600"


def test_settings_are_never_written_into_the_repo(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "conf").mkdir(parents=True)
    with pytest.raises(UsageError, match="inside the repository"):
        write_settings(repo / "conf" / "settings.yml", "secret", repo_root=repo, service="searxng")
    assert list((repo / "conf").iterdir()) == []  # nothing half-written


def test_env_file_errors_name_the_line(tmp_path: Path) -> None:
    env = tmp_path / "bad.env"
    env.write_text("GOOD=1\nthis is not an assignment\n")
    with pytest.raises(SettingsError) as info:
        read_env_files([env])
    assert info.value.where == f"{env}:2"
    with pytest.raises(SettingsError, match="cannot read env file"):
        read_env_files([tmp_path / "missing.env"])


def test_example_settings_template_renders(tmp_path: Path) -> None:
    template = (ROOT / "examples/homelab/settings/searxng.yml.template").read_text()
    text = render_settings(template, ["SEARXNG_SECRET"], {"SEARXNG_SECRET": "abc"}, where="t")
    assert 'secret_key: "abc"' in text and "${" not in text
