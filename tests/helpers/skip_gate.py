"""The skip gate: a pytest plugin that fails a run in which a test skipped by accident.

A skip is a decision, not an accident. A test that skips because a model, a binary or
a tool is missing on this machine makes a green run say nothing about it, so only
these reason prefixes are allowed, each with when:

- ``needs root`` when not running as root (network namespaces, nspawn, test users);
- ``partial run``: a test that checks the whole module and a ``-k``/node selection
  left part of it out (never in a full run).

Any other skip fails the run (exit 1) after the summary lists it; the summary always
prints the skip count by reason. As root (CI) only a partial run's skip is allowed, so
CI runs every test. Loaded by tests/conftest.py (``pytest_plugins``).
"""

from __future__ import annotations

import os

import pytest

ROOT_REASON = "needs root"
PARTIAL_REASON = "partial run"
_SKIPS: list[tuple[str, str]] = []


def _allowed(reason: str) -> bool:
    if reason.startswith(PARTIAL_REASON):
        return True  # only a -k / node-id selection can cause it (the test says why)
    return reason.startswith(ROOT_REASON) and os.geteuid() != 0


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPS.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _SKIPS.append((report.nodeid, _skip_reason(report)))


def _refused() -> list[tuple[str, str]]:
    return [(node, reason) for node, reason in _SKIPS if not _allowed(reason)]


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Test-lab tests create network namespaces and boot containers (registered marker).
    if item.get_closest_marker("needs_root") is not None and os.geteuid() != 0:
        pytest.skip(
            f"{ROOT_REASON}: creates network namespaces / boots systemd-nspawn "
            "(run as root, e.g. in CI's container: ./scripts/test)"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    passing = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if _refused() and exitstatus in passing:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    by_reason: dict[str, int] = {}
    for _node, reason in _SKIPS:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    write = terminalreporter.write_line
    terminalreporter.section("skip gate")
    write(f"{len(_SKIPS)} skipped ({'as root' if os.geteuid() == 0 else 'not as root'})")
    for reason, count in sorted(by_reason.items(), key=lambda item: -item[1]):
        verdict = "allowed" if _allowed(reason) else "NOT ALLOWED"
        write(f"  {count:4d} x [{verdict}] {reason}")
    refused = _refused()
    if refused:
        write(
            f"skip gate: {len(refused)} test(s) skipped for a reason that is not allowed "
            f"(only '{ROOT_REASON}' when not root, and '{PARTIAL_REASON}'): the run fails. "
            "Fix: install what the reason names (./scripts/test does, as root), or make the "
            "test provide it (tests/helpers/real_model.py for the model and llama-server).",
            red=True,
        )
        for node, reason in refused[:20]:
            write(f"  {node}: {reason}", red=True)
