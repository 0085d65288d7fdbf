"""L-23: the argv inferfleet renders keeps mmap on, seen in the running server's own mappings.

The real llama-server on the real test model, started from the launch the
renderer builds: the model file is mapped into the process
(``/proc/PID/maps``), so its pages are page cache, not anonymous memory
charged to the service. The control appends what a user's ``extra_args``
could (``--load-mode none``, this build's spelling of no-mmap): the file is
then not mapped, so the first test can tell the two apart.

Mutation killed: the llama.cpp adapter emitting a load mode without mmap
(``--load-mode none`` or ``--no-mmap`` on older builds) for every service.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.real_server import Running, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def mapped_ggufs(pid: int) -> set[str]:
    """The .gguf files mapped into process ``pid``."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {line.split(maxsplit=5)[5] for line in maps.splitlines() if line.endswith(".gguf")}


def model_path(server: Running) -> str:
    cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    return cmdline[cmdline.index(b"--model") + 1].decode()


def test_L23_the_rendered_launch_maps_the_model_file(server: Running) -> None:
    model = model_path(server)
    assert str(Path(model).resolve()) in {str(Path(m).resolve()) for m in mapped_ggufs(server.pid)}


def test_L23_control_a_load_without_mmap_maps_nothing(tmp_path: Path) -> None:
    with running_server(tmp_path, extra=("--load-mode", "none")) as server:
        assert mapped_ggufs(server.pid) == set()
