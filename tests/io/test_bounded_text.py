"""The readers of named text files and of secret files (inferfleet.bounded).

A file the user names (an env file, a manifest, a token file, a proxy's key
file) may be missing, not text, a FIFO no one writes, or, for a secret, open
to other users. Each is the caller's own error naming the file, read without
blocking; a secret's mode is judged on the file that was opened, so a file
swapped in after a check is never read.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from inferfleet.bounded import BoundedReadError, read_bounded_text
from inferfleet.errors import AuthError, UsageError
from inferfleet.hub.auth import read_token_file


def test_text_is_read_and_every_failure_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.env"
    good.write_text("A=1\n")
    assert read_bounded_text(good, 64, what="env file") == "A=1\n"
    binary = tmp_path / "binary.env"
    binary.write_bytes(b"A=1\nB=\xff\n")
    big = tmp_path / "big.env"
    big.write_text("A=1\n" * 100)
    cases = [
        (tmp_path / "absent.env", "cannot read env file", "it does not exist"),
        (binary, "is not UTF-8 text", "(byte 6, line 2)"),
        (big, "has 400 bytes", "at most 64 are read"),
        (tmp_path, "is a directory", "not a regular file"),
    ]
    for path, says, more in cases:
        with pytest.raises(UsageError) as caught:
            read_bounded_text(path, 64, what="env file", error=UsageError, hint="create it")
        message = caught.value.message
        assert says in message and more in message and str(path) in message, message
        assert caught.value.where == str(path) and caught.value.hint == "create it"


def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    started = time.monotonic()
    with pytest.raises(AuthError, match="is a FIFO, not a regular file"):
        read_token_file(fifo, source="test")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o660])
def test_a_secret_open_to_others_is_refused_and_not_shown(tmp_path: Path, mode: int) -> None:
    secret = tmp_path / "keys.env"
    secret.write_text("KEY=sk-do-not-show\n")
    secret.chmod(mode)
    with pytest.raises(BoundedReadError) as caught:
        read_bounded_text(secret, 1024, what="key file", private=True)
    assert f"can be read by other users (mode {mode:04o})" in caught.value.message
    assert f"chmod 600 {secret}" in caught.value.hint
    assert "sk-do-not-show" not in caught.value.render()
    # The same file, its owner's alone: read.
    secret.chmod(0o600)
    assert read_bounded_text(secret, 1024, what="key file", private=True) == "KEY=sk-do-not-show\n"


def test_a_secret_is_judged_by_the_file_it_leads_to(tmp_path: Path) -> None:
    """A private-looking link to a file others can read is refused: the mode checked is
    the opened file's, not the link's or a path looked at before the open."""
    target = tmp_path / "shared.env"
    target.write_text("KEY=sk-shared\n")
    target.chmod(0o644)
    link = tmp_path / "keys.env"
    link.symlink_to(target)
    with pytest.raises(BoundedReadError, match="mode 0644"):
        read_bounded_text(link, 1024, what="key file", private=True)
