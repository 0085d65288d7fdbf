"""Bounded parsing: hostile YAML and numbers past sane bounds are refused fast, by line.

The classic "billion laughs" file is 300 bytes and expands to 10^9 values;
parsed without a budget it took a minute and gigabytes. Here it is refused in
milliseconds in a child process held to a small memory cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_fleetfile_errors import BASE, refused_by_validate

from inferfleet.fleetfile.loader import MAX_BYTES

BOMB = "\n".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["hosts: *a9", ""]
)

# Parse the bomb in a child whose address space may grow by 64 MiB at most.
CHILD = textwrap.dedent(
    """
    import resource, sys, time
    from pathlib import Path
    from inferfleet.errors import SpecError
    from inferfleet.fleetfile.loader import load_fleet

    path = Path(sys.argv[1])
    with open("/proc/self/status") as status:
        vm = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmSize:"))
    cap = vm + 64 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    start = time.perf_counter()
    try:
        load_fleet(path)
    except SpecError as exc:
        print(f"{time.perf_counter() - start:.3f}")
        print(exc.render())
        sys.exit(0)
    sys.exit("the bomb was accepted")
    """
)


def test_billion_laughs_is_refused_fast_under_a_memory_cap(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 1000
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seconds, message = result.stdout.split("\n", 1)
    assert float(seconds) < 0.5, seconds
    assert f"{path}:" in message and "expands to more than 10000 values" in message
    assert "aliases" in message


def test_billion_laughs_through_the_cli(cli, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BOMB)
    result = cli("validate", str(path))
    assert result.code == 2, result
    assert f"{path}:" in result.stderr and "expands to more than" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hosts: " + "[" * 100_000, "nesting deeper than 64 levels"),
        ("hosts: " + "{a: " * 100 + "1" + "}" * 100, "nesting deeper than 64 levels"),
        ("hosts: &a [*a]\n", "nested deeper than 64 levels"),
        ("hosts: &a {x: *a}\n", "nested deeper than 64 levels"),
    ],
    ids=["deep-list", "deep-map", "self-list", "self-map"],
)
def test_deep_or_cyclic_nesting_is_refused_by_line(
    cli, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    result = cli("validate", str(path))
    assert result.code == 2, result
    assert f"{path}:1:" in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_oversized_file_is_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE + "#" * MAX_BYTES)
    result = cli("validate", str(path))
    assert (
        result.code == 2 and "has 1,0" in result.stderr and "at most 1,048,576" in result.stderr
    ), result


def test_a_fleet_file_that_is_no_regular_file_is_refused_not_waited_on(cli, tmp_path: Path) -> None:
    # A FIFO named as the fleet file would block a plain open() forever: the bounded
    # reader refuses it by its kind before reading.
    path = tmp_path / "fleet.yaml"
    os.mkfifo(path)
    result = cli("validate", str(path))
    assert result.code == 2 and "is a FIFO, not a regular file" in result.stderr, result
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("ctx_per_slot: 32768", "ctx_per_slot: 1" + "0" * 400, "ctx_per_slot"),
        ("ctx_per_slot: 32768", "ctx_per_slot: 1e400", "ctx_per_slot"),
        ("parallel: 2", "parallel: .nan", "parallel"),
        ("port: 8080", "port: .inf", "port"),
        ("memory: 24GiB", "memory: 1e400", "memory"),
        ("memory: 24GiB", "memory: " + "9" * 60 + "GiB", "larger than 1 EiB"),
        ("memory: 24GiB", "memory: 1" + "0" * 400, "larger than 1 EiB"),
        ("size: 5GiB", "size: .nan", "size"),
        ("timeout: 20m", "timeout: .nan", "not NaN"),
        ("timeout: 20m", "timeout: .inf", "longer than 30 days"),
        ("timeout: 20m", "timeout: 1e400", "is not a duration"),
        ("timeout: 20m", "timeout: 1.0e+400", "longer than 30 days"),
        ("timeout: 20m", "timeout: 1" + "0" * 400, "longer than 30 days"),
        ("timeout: 20m", "timeout: 99999999999h", "longer than 30 days"),
        ("parallel: 2", "parallel: 2\n    tensor_split: [.nan]", "finite"),
        ("parallel: 2", "parallel: 2\n    gpu_memory_utilization: .nan", "gpu_memory_utilization"),
        ("parallel: 2", "parallel: 2\n    unit: {restart_sec: -.inf}", "restart_sec"),
        ("parallel: 2", "parallel: 2\n    alias: 2001-13-45", "cannot be read"),
        ("parallel: 2", "parallel: 2\n    alias: !!int x", "cannot be read"),
        ("parallel: 2", "parallel: 2\n    alias: !!bool maybe", "cannot be read"),
    ],
)
def test_numbers_past_sane_bounds_are_schema_errors(
    cli, tmp_path: Path, old: str, new: str, fragment: str
) -> None:
    path, err = refused_by_validate(cli, tmp_path, old, new)
    assert f"{path}:" in err and fragment in err, err
    assert "internal error" not in err and "Traceback" not in err
