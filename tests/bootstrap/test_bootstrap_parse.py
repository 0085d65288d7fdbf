"""The pure parts of ``host bootstrap``: what the host's answers mean, and the wheel's cache keys.

Host output is outside input: every parser gets captured text and hostile text.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from helpers.wheels import write_wheel

from inferfleet import __version__
from inferfleet.bootstrap import checkout, host, wheels
from inferfleet.bootstrap.errors import HostPythonError
from inferfleet.deploy.rollout import remote_command
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Host


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("Python 3.11.7\n", (3, 11, 7)),
        ("Python 3.13.0rc1", (3, 13, 0)),
        ("Python 3.9", (3, 9, 0)),
        ("Python 2.7.18", (2, 7, 18)),
        ("bash: python3: command not found", None),
        ("", None),
        ("Python three", None),
    ],
)
def test_python_version_output(text: str, version: tuple[int, int, int] | None) -> None:
    assert host.parse_python_version(text) == version


def test_the_probe_reads_cpu_glibc_and_venv() -> None:
    text = '{"machine": "x86_64", "libc": ["glibc", "2.36"], "venv": true}\n'
    assert host.parse_probe(text, "host h1") == ("x86_64", (2, 36), True)
    musl = '{"machine": "aarch64", "libc": ["", ""], "venv": false}'
    assert host.parse_probe(musl, "host h1") == ("aarch64", None, False)
    for hostile in ("", "not json", '{"machine": "x86_64; rm -rf /", "libc": [], "venv": true}'):
        with pytest.raises(HostPythonError, match="did not answer the probe"):
            host.parse_probe(hostile, "host h1")


def test_the_venv_record_is_validated_or_ignored() -> None:
    good = host.parse_record(
        '{"version": "0.1.0", "wheel_sha256": "' + "a" * 64 + '", "deps": "wheelhouse"}'
    )
    assert good is not None and good.deps == "wheelhouse"
    assert host.parse_record("") is None
    assert host.parse_record('{"version": "0.1.0"}') is None  # damaged: installed again
    assert host.parse_record('{"version": "0.1.0", "wheel_sha256": "x", "deps": "index"}') is None
    assert host.parse_inferfleet_version("inferfleet 0.1.0") == "0.1.0"
    assert host.parse_inferfleet_version("Traceback (most recent call last):") is None


def test_up_to_date_needs_the_same_version_and_the_same_wheel(tmp_path: Path) -> None:
    wheel = wheels.Wheel(tmp_path / "w.whl", "0.1.0", "b" * 64, "given")
    record = host.Record(version="0.1.0", wheel_sha256="b" * 64, deps="index")
    assert host.up_to_date(host.Installed(True, "0.1.0", record), wheel)
    other = host.Record(version="0.1.0", wheel_sha256="c" * 64, deps="index")
    assert not host.up_to_date(host.Installed(True, "0.1.0", other), wheel)  # a rebuilt tree
    assert not host.up_to_date(host.Installed(True, None, record), wheel)  # venv broken
    assert not host.up_to_date(host.Installed(False, None, None), wheel)


@pytest.mark.parametrize("name", ["", "-c", "python3 -c 1", "py\nthon", "x" * 300])
def test_an_interpreter_name_is_one_word(name: str) -> None:
    with pytest.raises(UsageError):
        host.check_python_name(name)
    assert host.check_python_name("/usr/bin/python3.12") == "/usr/bin/python3.12"


def test_checkout_state_parsing() -> None:
    sha = "1" * 40
    text = (
        f"kind git\nhead {sha}\nbranch main\norigin https://git.example/fleet.git\n"
        "dirty  M README.md\ndirty ?? notes.txt\n"
    )
    state = checkout.parse_state(text)
    assert (state.kind, state.head, state.branch, state.git) == ("git", sha, "main", True)
    assert state.dirty == ["M README.md", "?? notes.txt"]
    assert checkout.parse_state("kind absent\n").kind == "absent"
    assert checkout.parse_state("nogit\nkind empty\n").git is False
    # Anything unexpected reads as "other": never cloned over.
    assert checkout.parse_state("").kind == "other"
    assert checkout.parse_state("kind mine\n").kind == "other"
    hostile = checkout.parse_state("kind git\nhead $(reboot)\nbranch ../../x y\n")
    assert hostile.head is None and hostile.branch is None


def test_dirty_and_foreign_checkouts_are_refused() -> None:
    from inferfleet.bootstrap.errors import CheckoutError

    with pytest.raises(CheckoutError, match="local changes"):
        checkout.refuse_unsafe(checkout.CheckoutState("git", dirty=["M a"]), "~/fleet", "h1")
    with pytest.raises(CheckoutError, match="not a git checkout"):
        checkout.refuse_unsafe(checkout.CheckoutState("other"), "~/fleet", "h1")
    with pytest.raises(CheckoutError, match="git is not installed"):
        checkout.refuse_unsafe(checkout.CheckoutState("absent", git=False), "~/fleet", "h1")
    checkout.refuse_unsafe(checkout.CheckoutState("absent"), "~/fleet", "h1")


def test_manylinux_platforms_follow_the_hosts_glibc() -> None:
    target = wheels.HostPlatform((3, 11, 7), "x86_64", (2, 17))
    platforms = target.platforms()
    assert platforms[0] == "manylinux_2_17_x86_64"
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(platforms)
    assert "manylinux_2_28_x86_64" not in platforms  # too new for this glibc
    assert target.tag == "cp311-x86_64-glibc2.17"
    assert wheels.HostPlatform((3, 12, 0), "aarch64", None).platforms() == []  # musl: no manylinux


def test_the_source_digest_changes_with_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "src" / "inferfleet" / "__pycache__").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "src" / "inferfleet" / "a.py").write_text("A = 1\n")
    first = wheels.source_digest(root)
    (root / "src" / "inferfleet" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert wheels.source_digest(root) == first  # byte code is not source
    (root / "src" / "inferfleet" / "a.py").write_text("A = 2\n")
    assert wheels.source_digest(root) != first


def test_a_given_wheel_must_be_this_version(tmp_path: Path) -> None:
    ours = write_wheel(tmp_path, "inferfleet", __version__, {"inferfleet/__init__.py": ""})
    given = wheels.inferfleet_wheel(ours, lambda _t: None)
    assert given.version == __version__ and given.origin == "given" and len(given.sha256) == 64
    older = write_wheel(tmp_path, "inferfleet", "0.0.1", {"inferfleet/__init__.py": ""})
    with pytest.raises(UsageError, match="hosts run the same version"):
        wheels.inferfleet_wheel(older, lambda _t: None)
    with pytest.raises(UsageError, match="not an inferfleet wheel file name"):
        wheels.wheel_version(tmp_path / "requests-2.0-py3-none-any.whl")


def test_requirements_come_from_the_wheels_metadata(tmp_path: Path) -> None:
    wheel = write_wheel(
        tmp_path, "inferfleet", __version__, {"inferfleet/__init__.py": ""},
        requires=("pydantic>=2.7", "rich>=13.7"),
    )  # fmt: skip
    assert wheels.requirements(wheel) == ["pydantic>=2.7", "rich>=13.7"]
    broken = tmp_path / "inferfleet-0.1.0-py3-none-any.whl.broken"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("inferfleet/__init__.py", "")
    from inferfleet.bootstrap.errors import BootstrapError

    with pytest.raises(BootstrapError, match="no single METADATA"):
        wheels.requirements(broken)


def test_the_remote_command_prefers_the_override_then_the_hosts_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND", raising=False)
    spec = Host(venv="/opt/if venv")
    line = remote_command(spec)
    assert "'/opt/if venv/bin/inferfleet'" in line and "|| echo inferfleet" in line
    assert remote_command() == "inferfleet"
    monkeypatch.setenv("INFERFLEET_REMOTE_COMMAND", "/usr/local/bin/inferfleet")
    assert remote_command(spec) == "/usr/local/bin/inferfleet"


def test_the_remote_command_runs_the_venv_else_the_path_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell word itself, run by sh: the venv's inferfleet when there, else PATH's."""
    import os
    import subprocess

    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND", raising=False)
    path_bin = tmp_path / "bin"
    path_bin.mkdir()
    (path_bin / "inferfleet").write_text('#!/bin/sh\necho from-path "$@"\n')
    (path_bin / "inferfleet").chmod(0o755)
    venv = tmp_path / "my venv"
    env = {**os.environ, "PATH": f"{path_bin}:{os.environ['PATH']}"}

    def answer() -> str:
        line = remote_command(Host(venv=str(venv))) + " --version"
        done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env)
        return done.stdout.strip()

    assert answer() == "from-path --version"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "inferfleet").write_text('#!/bin/sh\necho from-venv "$@"\n')
    (venv / "bin" / "inferfleet").chmod(0o755)
    assert answer() == "from-venv --version"


def test_linger_on_a_host_escalates_by_the_hosts_user_not_ours() -> None:
    """The argv is built here and run there: whether sudo is needed is the host user's uid."""
    from inferfleet.io import process
    from inferfleet.io.become import Become, BecomeError

    argv = ["loginctl", "enable-linger", "ops"]
    as_ops = Become("h1", "sudo", uid=1000, user="ops")
    wrapped = as_ops.argv(argv)
    assert wrapped[:3] == ["sudo", "-n", "--"] and wrapped[3].endswith("/loginctl")
    assert wrapped[4:] == ["enable-linger", "ops"]
    assert Become("h1", "sudo", uid=0, user="root").argv(argv) == argv  # root: as is
    assert Become("h1", None, uid=1000, user="ops").argv(argv) == argv  # no become: as is
    refused = process.Completed(tuple(wrapped), 1, "", "sudo: a password is required\n")
    with pytest.raises(BecomeError) as caught:
        as_ops.check(refused, argv)
    assert "host h1 (user ops, become: sudo)" in caught.value.where
    assert "ops ALL=(root) NOPASSWD:" in caught.value.hint
    as_ops.check(process.Completed(tuple(wrapped), 1, "", "Failed to connect to bus"), argv)
