"""`inferfleet import host HOST`: a llama-server started by hand on a test host, over ssh.

The host is a network namespace with its own sshd (the deploy tests' lab);
the server is the real llama-server on the real Gemma 3 270M model, started
there by hand (no inferfleet record of it). The import finds it through
/proc, reads its model's size there, and the imported service's argv is the
one that runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import deploy_hosts
import pytest
import yaml
from deploy_hosts import Lab
from helpers import free_port
from helpers.cli import CliResult
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet.deploy import local
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io import process

Cli = Callable[..., CliResult]
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]


@contextlib.contextmanager
def by_hand(host: deploy_hosts.TestHost, argv: list[str], log: Path) -> Iterator[int]:
    proc = host.spawn(argv, log)
    try:
        yield proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
            proc.wait(timeout=10)


def test_import_host_finds_a_server_started_by_hand(
    cli: Cli, lab: Lab, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    example = write_fleet(tmp_path / "example" / "fleet.yaml", fleet_data(free_port()))
    prepared = local.prepare(load_fleet(example), SERVICE, local.Hooks())
    binary = prepared.argv[0]
    model = prepared.argv[prepared.argv.index("--model") + 1]
    h1 = lab.hosts["h1"]
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "# the lab's host, declared by hand\n"
        + yaml.safe_dump({"version": 1, "hosts": {"h1": {"address": h1.address}}})
    )
    argv = [binary, "-m", model, "--port", "8181", "-c", "4096", "-np", "2", "--alias",
            "gemma-by-hand", "--temp", "0.5"]  # fmt: skip
    with by_hand(h1, argv, tmp_path / "server.log"):
        deadline = time.monotonic() + 120
        while True:  # healthy inside the namespace: the probe sees its port listening
            done = process.run(
                ["ip", "netns", "exec", h1.netns, "curl", "-fsS", "http://127.0.0.1:8181/health"],
                check=False,
                timeout=10,
            )
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        result = cli("import", "host", "h1", "--port", "8181", "--out", str(fleet))
    assert result.code == 0, result.stdout + result.stderr
    assert "same argv gemma-by-hand" in result.stdout
    loaded = load_fleet(fleet)
    service = loaded.fleet.services["gemma-by-hand"]
    assert (service.host, service.port, service.ctx_per_slot, service.parallel) == (
        "h1", 8181, 2048, 2,
    )  # fmt: skip
    assert service.extra_args == ["--temp", "0.5"]
    model_block = loaded.fleet.models[service.model or ""]
    assert model_block.files[0].size == Path(model).stat().st_size
    assert "# the lab's host, declared by hand" in fleet.read_text()
    # Nothing runs there any more: the import says so and writes nothing.
    before = fleet.read_text()
    again = cli("import", "host", "h1", "--port", "8181", "--out", str(fleet))
    assert (
        again.code == 2
        and "no llama-server, vLLM or SGLang server runs on host 'h1' on port 8181" in again.stderr
    )
    assert fleet.read_text() == before
