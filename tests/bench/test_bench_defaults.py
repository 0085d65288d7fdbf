"""What `inferfleet bench` does unless told otherwise, and when it is stopped.

- The default is a quick look (two levels, two runs, four prompts, 128 tokens: about a
  minute on the embedded example); ``--thorough`` is every prompt at 1,2,4, three runs,
  256 tokens. Counted on the requests a loopback stand-in received (a stand-in: what is
  asserted is what the bench sends and where it writes, not a server's speed).
- Results land in the state folder's ``bench/``, where ``status`` and the board read them.
- Ctrl-C keeps what finished: a real ``python -m inferfleet bench`` gets SIGINT in the
  middle of a level and exits 130 with the finished requests written and the summary
  marked ``interrupted``.
- Without matplotlib the bench still measures and writes everything; only the plots are
  skipped, said on stderr and in the report.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ctrl_c_reaches_it
from helpers.asgi_server import openai_app, serving
from helpers.real_server import fleet_data, write_fleet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from inferfleet.bench.battery import load_battery
from inferfleet.status.bench import scan

MODEL = "standin"


class PacedServer:
    """Streams ``max_tokens`` words, ``delay`` seconds apart; counts what it served."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.started: list[int] = []  # max_tokens of every request received
        self.finished = 0

    async def complete(self, request: Request) -> Response:
        body = json.loads(await request.body())
        n = int(body["max_tokens"])
        self.started.append(n)
        chat = "messages" in body

        async def events() -> AsyncIterator[bytes]:
            for i in range(n):
                if self.delay:
                    await asyncio.sleep(self.delay)
                piece = {"delta": {"content": f"w{i} "}} if chat else {"text": f"w{i} "}
                chunk = {"model": MODEL, "choices": [{"index": 0, **piece}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            usage = {"prompt_tokens": 50, "completion_tokens": n, "total_tokens": 50 + n}
            final = {"model": MODEL, "choices": [], "usage": usage}
            yield f"data: {json.dumps(final)}\n\n".encode()
            yield b"data: [DONE]\n\n"
            self.finished += 1

        return StreamingResponse(events(), media_type="text/event-stream")

    def app(self) -> Starlette:
        return openai_app(self.complete, MODEL)


def one_level(url: str, out: Path, *, prompts: int, python: list[str] | None = None) -> list[str]:
    """A real ``python -m inferfleet bench`` of one level, one run, ``prompts`` prompts."""
    head = python or [sys.executable]
    return [
        *head,
        "-m",
        "inferfleet",
        "bench",
        url,
        "--out",
        str(out),
        "--concurrency",
        "1",
        "--runs",
        "1",
        "--prompts",
        str(prompts),
    ]


def _waves(prompts: int, levels: tuple[int, ...]) -> int:
    """Requests of one run: each level tops its prompts up to whole waves."""
    return sum(math.ceil(prompts / c) * c for c in levels)


def test_the_default_is_a_quick_look_that_lands_where_status_reads(
    cli: Any, tmp_path: Path
) -> None:
    server = PacedServer()
    with serving(server.app()) as url:
        result = cli("bench", url, "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    options = doc["options"]
    assert options["concurrency"] == [1, 4] and options["runs"] == 2
    assert options["max_tokens"] == 128
    # One warm-up of 8 tokens, then 2 runs of 4 prompts at c=1 and one wave of 4 at c=4.
    assert server.started[0] == 8
    assert len(server.started) == 1 + 2 * _waves(4, (1, 4))
    assert set(server.started[1:]) == {128}

    state = Path(os.environ["INFERFLEET_STATE_DIR"])
    summaries = list((state / "bench").glob("*/summary.json"))
    assert len(summaries) == 1, "the results are not in the state folder's bench/"
    index = scan(state / "bench")
    figures = index.figures("any-service", [url])
    assert figures is not None and figures.arm == doc["arms"][0]["name"]
    assert [lv.concurrency for lv in figures.levels] == [1, 4]


def test_the_quick_look_of_a_service_uses_its_slots_as_the_second_level(
    cli: Any, tmp_path: Path
) -> None:
    # More streams than slots only queue: a service declaring 3 slots is measured at 1 and 3.
    server = PacedServer()
    with serving(server.app()) as url:
        port = int(url.rsplit(":", 1)[1])
        fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port, parallel=3))
        result = cli("bench", "gemma", "--file", str(fleet), "--api", "completions", "--json")
        assert result.code == 0, result.stderr
        assert json.loads(result.stdout)["options"]["concurrency"] == [1, 3]
        # A second bench within the same second gets a folder of its own, next to the first.
        given = cli(
            "bench",
            "gemma",
            "--file",
            str(fleet),
            "--api",
            "completions",
            "-c",
            "2",
            "--runs",
            "1",
            "--json",
        )
    assert given.code == 0, given.stderr
    assert json.loads(given.stdout)["options"]["concurrency"] == [2]  # an explicit level wins
    state = Path(os.environ["INFERFLEET_STATE_DIR"])
    assert len(list((state / "bench").glob("*/summary.json"))) == 2


def test_thorough_measures_every_prompt_at_three_levels(cli: Any, tmp_path: Path) -> None:
    server = PacedServer()
    prompts = len(load_battery().prompts)
    with serving(server.app()) as url:
        result = cli("bench", url, "--thorough", "--out", str(tmp_path / "r"), "--json")
    assert result.code == 0, result.stderr
    options = json.loads(result.stdout)["options"]
    assert options["concurrency"] == [1, 2, 4] and options["runs"] == 3
    assert options["max_tokens"] == 256
    assert len(server.started) == 1 + 3 * _waves(prompts, (1, 2, 4))
    # An explicit option still wins over the depth's default.
    server2 = PacedServer()
    with serving(server2.app()) as url:
        again = cli("bench", url, "--thorough", "--runs", "1", "--out", str(tmp_path / "s"))
    assert again.code == 0, again.stderr
    assert len(server2.started) == 1 + _waves(prompts, (1, 2, 4))


def test_ctrl_c_keeps_what_finished_and_exits_130(tmp_path: Path) -> None:
    server = PacedServer(delay=0.02)  # 128 tokens: about 2.6 s a request
    out = tmp_path / "results"
    with serving(server.app()) as url:
        proc = subprocess.Popen(
            [*one_level(url, out, prompts=4), "--no-warmup"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
            preexec_fn=ctrl_c_reaches_it,
        )
        try:
            deadline = time.monotonic() + 60
            while server.finished < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.finished >= 2, "the bench did not get through two requests"
            time.sleep(0.3)  # the third is streaming now
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert "interrupted" in summary["aborted"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    # The finished requests are kept; the one cut short is not counted as measured.
    assert 2 <= len(records) < 4
    assert all(r["ok"] for r in records)
    assert summary["levels"] and summary["levels"][0]["requests"] == len(records)
    assert "stopped early" in stdout
    assert not [p for p in tmp_path.iterdir() if p.name != "results"], "staging left behind"


def test_without_matplotlib_the_bench_measures_and_skips_only_the_plots(
    tmp_path: Path,
) -> None:
    # A real import failure: a `matplotlib` package that raises ImportError, first on the
    # path of a real `python -m inferfleet` (no user site).
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("matplotlib is hidden here")\n')
    out = tmp_path / "results"
    server = PacedServer()
    with serving(server.app()) as url:
        done = subprocess.run(
            one_level(url, out, prompts=1, python=[sys.executable, "-s"]),
            capture_output=True,
            text=True,
            timeout=120,
            env={
                "PYTHONPATH": str(tmp_path / "shadow"),
                "COLUMNS": "250",
                "PATH": "/usr/bin:/bin",
                "INFERFLEET_STATE_DIR": str(tmp_path / "state"),
            },
        )
    assert done.returncode == 0, done.stderr
    assert "plots skipped: matplotlib is not installed" in done.stderr
    assert "pip install 'inferfleet[bench]'" in done.stderr
    assert (out / "summary.json").is_file() and not (out / "plots").exists()
    assert "plots skipped" in (out / "report.md").read_text()


def test_two_benches_in_one_second_get_a_folder_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Seen in a full run: the second bench of a test in the same second was refused
    # ("already exists"), as a script running two benches back to back would be.
    from inferfleet.cli import bench_cmd

    monkeypatch.setattr(bench_cmd.time, "strftime", lambda _fmt: "20261204T120000")
    first = bench_cmd._fresh_results_dir()
    first.mkdir(parents=True)
    (first / "summary.json").write_text("{}")
    second = bench_cmd._fresh_results_dir()
    assert second.name == "20261204T120000-2" and not second.exists()
    second.mkdir()
    assert bench_cmd._fresh_results_dir().name == "20261204T120000-3"
