"""Hostile fleet values: nothing unescaped reaches a unit, env file or command line.

A value with a line break (or CR, NUL, VT, FF, ESC, DEL, C1 NEL, U+2028)
could end a unit line and add directives of its own (``ExecStartPre=`` as
root). Each is refused where the fleet file is read, with ``file:line`` and
exit 2, and ``render`` writes nothing, so ``systemd-analyze verify`` (or a
host's systemd) never sees it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_fleetfile_errors import BASE

from inferfleet.deploy.errors import SshError
from inferfleet.deploy.ssh import SshConnector, Target

INJECT = "\\n[Service]\\nExecStartPre=/bin/sh -c evil"  # YAML double-quoted escapes
# Characters as YAML double-quoted escapes: each ends or garbles a line somewhere.
CONTROLS = {
    "LF": "\\n",
    "CR": "\\r",
    "NUL": "\\0",
    "VT": "\\v",
    "FF": "\\f",
    "ESC": "\\e",
    "DEL": "\\x7f",
    "NEL": "\\N",
    "TAB": "\\t",
    "LS": "\\L",
    "surrogate": "\\ud800",
    "bidi": "\\u202e",
}

PARALLEL = "    parallel: 2\n"


def svc(line: str) -> tuple[str, str]:
    """(old, new) adding ``line`` to the service."""
    return PARALLEL, f"{PARALLEL}    {line}\n"


def host(line: str) -> tuple[str, str]:
    """(old, new) adding ``line`` to the host."""
    return "    address: 10.0.0.5\n", f"    address: 10.0.0.5\n    {line}\n"


# (id, (old text, new text with {bad}))
FIELDS = [
    ("extra_args", svc('extra_args: ["--x", "a{bad}"]')),
    ("env value", svc('env: {{NOTE: "a{bad}"}}')),
    ("runtime_env", svc('runtime_env: {{X: "a{bad}"}}')),
    ("binary", ("binary: /opt/llama/bin/llama-server", 'binary: "/opt/llama{bad}"')),
    ("alias", ("    port: 8080\n", '    port: 8080\n    alias: "chat{bad}"\n')),
    ("health.path", ("      timeout: 20m\n", '      timeout: 20m\n      path: "/h{bad}"\n')),
    ("checkout", host('checkout: "~/f{bad}"')),
    ("ssh user", host('ssh: {{user: "u{bad}"}}')),
    ("unit user", svc('unit: {{user: "svc{bad}"}}')),
    ("model file", ("path: qwen3-8b-q4_k_m.gguf", 'path: "q{bad}.gguf"')),
    ("container env", svc('container: {{env: {{A: "x{bad}"}}}}')),
    ("volume", svc('container: {{volumes: [{{host: "/a{bad}", container: /b}}]}}')),
    ("settings dest", svc('settings: [{{template: t, dest: "/d{bad}", allow: [A]}}]')),
    ("secrets_env", svc('secrets_env: "~/s{bad}.env"')),
    ("mmproj", svc('mmproj: "m{bad}.gguf"')),
    ("tensor override", svc('tensor_overrides: [{{pattern: "x{bad}"}}]')),
]  # fmt: skip


def line_of(old: str, new: str) -> int:
    """The line of BASE, with ``old`` replaced by ``new``, holding ``{bad}``."""
    before = BASE[: BASE.index(old)] + new[: new.index("{bad}")]
    return before.count("\n") + 1


def write(tmp_path: Path, old: str, new: str) -> Path:
    assert old in BASE
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace(old, new, 1))
    return path


def refused(cli, path: Path, line: int, *fragments: str) -> str:
    result = cli("validate", str(path))
    err = " ".join(result.stderr.split())
    assert result.code == 2, result
    assert f"{path}:{line}:" in err, err
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in result.stderr + result.stdout
    return err


@pytest.mark.parametrize("change", [f[1] for f in FIELDS], ids=[f[0] for f in FIELDS])
def test_unit_injection_is_refused_at_the_schema(
    cli, tmp_path: Path, change: tuple[str, str]
) -> None:
    old, new = change
    path = write(tmp_path, old, new.format(bad=INJECT))
    refused(cli, path, line_of(old, new), "control character (U+000A line feed)", " -- ")
    # render never writes a unit with it: systemd-analyze (or systemd) never sees it.
    out = tmp_path / "out"
    result = cli("render", "--file", str(path), "--out", str(out))
    assert result.code == 2, result
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


@pytest.mark.parametrize("char", list(CONTROLS.values()), ids=list(CONTROLS))
def test_every_control_character_is_refused(cli, tmp_path: Path, char: str) -> None:
    path = write(tmp_path, *svc(f'extra_args: ["a{char}b"]'))
    refused(cli, path, 29, "services.chat.extra_args[0]")


def test_raw_control_byte_in_the_file_names_its_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace("    port: 8080", "    port: 8080\x0b"))
    refused(cli, path, 26, "U+000B")


@pytest.mark.parametrize(
    ("key", "line"),
    [("NOT-A-NAME", 29), ("1X", 29), ("A B", 29)],
)
def test_env_keys_are_variable_names(cli, tmp_path: Path, key: str, line: int) -> None:
    path = write(tmp_path, "    parallel: 2\n", f'    parallel: 2\n    env: {{"{key}": "1"}}\n')
    refused(cli, path, line, "services.chat.env")


@pytest.mark.parametrize(
    "health",
    ["http://evil.example/x", "//evil.example/x", "health", "/a/../../b", "/a b", "/x#y"],
)
def test_health_path_is_an_absolute_path(cli, tmp_path: Path, health: str) -> None:
    path = write(tmp_path, "      timeout: 20m\n", f'      timeout: 20m\n      path: "{health}"\n')
    refused(cli, path, 32, "health.path")


@pytest.mark.parametrize("address", ["-oProxyCommand=evil", "-x", "a b", "host;id", "a/b"])
def test_host_address_never_reads_as_an_option(cli, tmp_path: Path, address: str) -> None:
    path = write(tmp_path, "address: 10.0.0.5", f'address: "{address}"')
    refused(cli, path, 4, "not a host address")


def test_ssh_argv_ends_options_before_the_destination() -> None:
    connector = SshConnector(Target("gpu1", "gpu1.lan", "ops", 2222))
    argv = connector._argv("-T")
    assert argv[-2:] == ["--", "gpu1.lan"]
    with pytest.raises(SshError, match="not a host address"):
        Target("gpu1", "-oProxyCommand=evil")


@pytest.mark.parametrize("value", ["a:b", "a,b"])
def test_volume_paths_cannot_shift_podman_fields(cli, tmp_path: Path, value: str) -> None:
    new = f'    parallel: 2\n    container: {{volumes: [{{host: "/{value}", container: /b}}]}}\n'
    path = write(tmp_path, "    parallel: 2\n", new)
    refused(cli, path, 29, "volume path cannot contain")


@pytest.mark.parametrize(
    "repo", ["../../x", "Qwen/..", "-oProxyCommand=x/y", "Qwen", "a/b/c", ".x/y", "a--b/c"]
)
def test_hub_repo_ids_have_the_owner_name_shape(cli, tmp_path: Path, repo: str) -> None:
    path = write(tmp_path, "hub: Qwen/Qwen3-8B-GGUF", f'hub: "{repo}"')
    refused(cli, path, 16, "is not a Hugging Face repo id", "models.qwen.source")
    out = tmp_path / "out"
    assert cli("render", "--file", str(path), "--out", str(out)).code == 2
    assert not out.exists()


@pytest.mark.parametrize("revision", ["../../../etc", "main/..", "-x", "a b"])
def test_hub_revisions_have_no_dot_dot_parts(cli, tmp_path: Path, revision: str) -> None:
    old = "revision: 0123456789abcdef0123456789abcdef01234567"
    path = write(tmp_path, old, f'revision: "{revision}"')
    refused(cli, path, 17, "is not a revision")


@pytest.mark.parametrize("user", ["-oProxyCommand=evil", "-l", "a b", "root;id", "a/b", "x" * 33])
def test_ssh_and_unit_users_have_the_posix_shape(cli, tmp_path: Path, user: str) -> None:
    path = write(tmp_path, *host(f'ssh: {{user: "{user}"}}'))
    refused(cli, path, 5, "is not a user name", "hosts.gpu1.ssh.user")
    path = write(tmp_path, *svc(f'unit: {{user: "{user}"}}'))
    refused(cli, path, 29, "is not a user name")
    path = write(tmp_path, *svc(f'container: {{user: "1000:{user}"}}'))
    refused(cli, path, 29, "is not a user name")


def test_ordinary_repo_ids_and_users_pass(cli, tmp_path: Path) -> None:
    text = BASE.replace("hub: Qwen/Qwen3-8B-GGUF", "hub: unsloth/gemma-3-270m-it-GGUF").replace(
        "    address: 10.0.0.5\n", "    address: 10.0.0.5\n    ssh: {user: svc_ops-1}\n"
    )
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    assert cli("validate", str(path)).code == 0
