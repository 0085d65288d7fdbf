"""io.process.run with ``limit``: what another host prints is read bounded in size and time."""

from __future__ import annotations

import time

import pytest

from inferfleet.errors import ProcessError
from inferfleet.io import process


def test_output_within_the_limit_is_read_whole_from_both_streams() -> None:
    done = process.run(
        ["sh", "-c", "printf 'out\\n'; printf 'err\\n' >&2; printf '\\377\\n'; exit 3"],
        check=False,
        limit=1000,
    )
    assert (done.returncode, done.stderr) == (3, "err\n")
    assert done.stdout == "out\n\ufffd\n"  # not UTF-8: replaced, never an exception


def test_more_output_than_the_limit_is_stopped_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(ProcessError, match=r"^sh printed more than 100000 bytes: stopped"):
        process.run(["sh", "-c", "exec yes garbage"], check=False, timeout=60, limit=100_000)
    assert time.monotonic() - started < 10  # killed, not read to the end (it has none)


def test_a_command_that_hangs_is_stopped_at_its_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(ProcessError, match=r"^sh did not finish within 1 s"):
        process.run(
            ["sh", "-c", "printf 'half'; exec sleep 60"], check=False, timeout=1, limit=1000
        )
    assert time.monotonic() - started < 10


def test_a_failure_with_check_is_an_error() -> None:
    with pytest.raises(ProcessError, match="exited with status 2"):
        process.run(["sh", "-c", "exit 2"], limit=1000)
