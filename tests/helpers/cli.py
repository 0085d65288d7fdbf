"""The real ``inferfleet`` entry point run in-process, as the ``cli`` fixture offers it."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def document(self) -> dict[str, Any]:
        """stdout as the one JSON document a ``--json`` run prints."""
        doc = json.loads(self.stdout)
        assert isinstance(doc, dict), self.stdout
        return doc


def run_cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> CliResult:
    """``inferfleet ARGS`` through ``main`` (exit code, stdout, stderr); never raises SystemExit."""
    from inferfleet.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "argv", ["inferfleet", *args])
    # Wide fake terminal so rich does not wrap long messages mid-word.
    monkeypatch.setenv("COLUMNS", "250")
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())
