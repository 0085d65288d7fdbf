"""The search strategy and the space, on their own (the real boots are in test_tune_real.py).

The measurements here are a stand-in: a table of figures per candidate and a
clock that advances by what each boot and run would cost. What is asserted is
the strategy: successive halving keeps the better half, measures the
baseline in every rung, never decides on one run, stops at the budget and
says so, and names a winner only beyond the run-to-run noise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Host
from inferfleet.fleetfile.service import Service
from inferfleet.tune.search import Abort, Outcome, Rejected, halving
from inferfleet.tune.space import (
    Candidate,
    apply,
    candidates,
    combine,
    current,
    default_space,
    load_space,
)

SERVICE = Service.model_validate(
    {
        "host": "local",
        "runtime": "lcpp",
        "model": "m",
        "port": 8080,
        "ctx_per_slot": 4096,
        "extra_args": ["--threads", "4", "--jinja", "-ub=512"],
    }
)
HOST = Host.model_validate({"address": "localhost"})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stand_in(figures: dict[str, list[float]], clock: Clock, per_run: float = 10.0):
    """Each run of a candidate costs ``per_run`` seconds and gives its next figure."""
    seen: dict[str, int] = {}
    calls: list[tuple[str, int]] = []

    def measure(candidate: Candidate, runs: int) -> list[float]:
        calls.append((candidate.id, runs))
        clock.now += per_run * runs
        start = seen.get(candidate.id, 0)
        seen[candidate.id] = start + runs
        values = figures[candidate.id]
        return [values[(start + i) % len(values)] for i in range(runs)]

    return measure, calls


def outcomes(n: int) -> list[Outcome]:
    made = [Outcome(Candidate("baseline", (("threads", 4),), baseline=True))]
    made += [Outcome(Candidate(f"c{i}", (("threads", i),))) for i in range(1, n + 1)]
    return made


def test_halving_keeps_the_better_half_and_the_baseline_in_every_rung() -> None:
    clock = Clock()
    figures = {"baseline": [10.0, 10.2], "c1": [9.0, 9.1], "c2": [14.0, 14.3], "c3": [11.0, 11.4],
               "c4": [8.0, 8.2]}  # fmt: skip
    measure, calls = stand_in(figures, clock)
    result = halving(outcomes(4), measure, metric="tok/s", higher_better=True, budget_s=10_000,
                     clock=clock)  # fmt: skip
    rung0 = [c for c in calls[:5]]
    assert rung0 == [("baseline", 1), ("c1", 1), ("c2", 1), ("c3", 1), ("c4", 1)]
    # Rung 1: the baseline and the better half (c2, c3), two runs each; then c2 alone.
    assert calls[5:8] == [("baseline", 2), ("c2", 2), ("c3", 2)]
    assert calls[8:] == [("baseline", 3), ("c2", 3)]
    assert result.winner is not None and result.winner.candidate.id == "c2"
    assert result.verdict is not None and result.verdict.verdict == "b higher"
    assert result.budget_left and result.rungs == 3


def test_a_challenger_within_the_noise_is_no_winner() -> None:
    clock = Clock()
    # c1 looks better once, but the baseline's own runs spread wider than the gap.
    measure, _ = stand_in({"baseline": [10.0, 12.0, 9.0], "c1": [11.0, 10.5, 11.2]}, clock)
    result = halving(outcomes(1), measure, metric="tok/s", higher_better=True, budget_s=10_000,
                     clock=clock)  # fmt: skip
    assert result.winner is None
    assert result.verdict is not None and result.verdict.verdict == "within noise"


def test_lower_is_better_for_time_to_first_token() -> None:
    clock = Clock()
    measure, _ = stand_in({"baseline": [300.0, 305.0], "c1": [200.0, 202.0]}, clock)
    result = halving(outcomes(1), measure, metric="ttft ms", higher_better=False,
                     budget_s=10_000, clock=clock)  # fmt: skip
    assert result.winner is not None and result.verdict is not None
    assert result.verdict.verdict == "b lower"


def test_the_budget_stops_the_search_and_one_run_decides_nothing() -> None:
    clock = Clock()
    figures = {"baseline": [10.0], "c1": [30.0], "c2": [9.0], "c3": [8.0]}
    measure, calls = stand_in(figures, clock, per_run=10.0)
    result = halving(outcomes(3), measure, metric="tok/s", higher_better=True, budget_s=45,
                     clock=clock)  # fmt: skip
    assert len(calls) == 4 and not result.budget_left
    assert [o.status for o in result.outcomes] == ["measured"] * 4
    # c1 is three times the baseline, on one run each: no noise known, no winner.
    assert result.winner is None
    assert result.verdict is not None and "noise unknown" in result.verdict.verdict


def test_a_later_rung_starts_only_when_all_of_it_fits_the_budget() -> None:
    clock = Clock()
    figures = {"baseline": [10.0, 10.1], "c1": [14.0, 14.2]}
    measure, calls = stand_in(figures, clock, per_run=10.0)
    # Rung 1 would be the baseline's two runs (fits: 20 + 20 <= 45) and c1's (does not):
    # measuring the baseline alone would leave c1 nothing of the same rung to compare with.
    result = halving(outcomes(1), measure, metric="tok/s", higher_better=True, budget_s=45,
                     clock=clock)  # fmt: skip
    assert calls == [("baseline", 1), ("c1", 1)] and not result.budget_left
    assert result.rungs == 1
    assert [o.rung for o in result.outcomes] == [0, 0]
    assert [len(o.runs) for o in result.outcomes] == [1, 1]
    assert result.verdict is not None and "noise unknown" in result.verdict.verdict


def test_rejected_candidates_are_kept_with_their_reason_and_unfit_never_measured() -> None:
    clock = Clock()
    made = outcomes(3)
    made[2].status, made[2].reason = "unfit", "device-memory-fit (L-27): needs more"
    figures = {"baseline": [10.0, 10.1], "c1": [], "c3": [12.0, 12.1]}

    def measure(candidate: Candidate, runs: int) -> list[float]:
        clock.now += runs
        if candidate.id == "c1":
            raise Rejected("contract: context per slot: 2048, declared 4096")
        return figures[candidate.id][:runs] or [figures[candidate.id][0]]

    result = halving(made, measure, metric="tok/s", higher_better=True, budget_s=1000,
                     clock=clock)  # fmt: skip
    by_id = {o.candidate.id: o for o in result.outcomes}
    assert by_id["c1"].status == "rejected" and "2048" in by_id["c1"].reason
    assert by_id["c2"].status == "unfit" and by_id["c2"].runs == []
    assert result.winner is not None and result.winner.candidate.id == "c3"


def test_an_abort_keeps_what_was_measured() -> None:
    clock = Clock()

    def measure(candidate: Candidate, runs: int) -> list[float]:
        if candidate.id == "c2":
            raise Abort("memory did not come back (L-52)")
        return [10.0] * runs

    result = halving(outcomes(2), measure, metric="tok/s", higher_better=True, budget_s=1000,
                     clock=clock)  # fmt: skip
    assert result.aborted == "memory did not come back (L-52)"
    assert result.outcomes[1].status == "measured" and result.winner is None


def test_the_space_reads_the_declared_values_and_applies_a_candidate() -> None:
    assert current(SERVICE, "threads") == 4
    assert current(SERVICE, "ubatch") == 512  # the --flag=value form
    assert current(SERVICE, "flash_attn") == "auto" and current(SERVICE, "batch") is None
    assert current(SERVICE, "kv_cache") == "f16/f16"
    wanted = {"threads": 2, "ubatch": 128, "flash_attn": "on", "kv_cache": "q8_0/q8_0"}
    made = apply(SERVICE, wanted)
    assert made["extra_args"] == ["--jinja", "-t", "2", "-ub", "128"]
    assert made["flash_attn"] == "on" and made["kv_cache"] == {"k": "q8_0", "v": "q8_0"}
    assert "extra_args" not in apply(SERVICE, {"flash_attn": "off"})


def test_the_default_space_and_a_space_file(tmp_path: Path) -> None:
    space = default_space(SERVICE, "llama.cpp", HOST, (2, 4))
    assert space.knobs == {"threads": (1, 2, 4), "ubatch": (256, 512, 1024),
                           "flash_attn": ("on", "off")}  # fmt: skip
    found = candidates(SERVICE, space)
    assert found[0].baseline and found[0].as_dict == {"flash_attn": "auto", "threads": 4,
                                                      "ubatch": 512}  # fmt: skip
    assert len(found) == 1 + 3 * 3 * 2
    file = tmp_path / "space.yaml"
    file.write_text(yaml.safe_dump({"knobs": {"threads": [1, 2], "ubatch": None}}))
    wider = combine(space, load_space(file), "llama.cpp", str(file))
    assert wider.knobs == {"threads": (1, 2), "flash_attn": ("on", "off")}
    file.write_text(yaml.safe_dump({"knobs": {"kv_cache": ["f16/f16", "q8_0/q8_0"]}, "only": True}))
    assert combine(space, load_space(file), "llama.cpp", str(file)).knobs == {
        "kv_cache": ("f16/f16", "q8_0/q8_0")
    }


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"knobs": {"warp": [1]}}, "unknown knob(s): warp"),
        ({"knobs": {"threads": "two"}}, "knobs.threads"),
        ({"nobs": {}}, "nobs"),
        ({"knobs": {"chunked_prefill": ["on"]}}, "is not a llama.cpp setting"),
        (
            {
                "knobs": {
                    "threads": list(range(1, 9)),
                    "ubatch": list(range(1, 9)),
                    "batch": list(range(1, 9)),
                }
            },
            "candidates (at most 256)",
        ),  # fmt: skip
    ],
)
def test_a_bad_space_file_is_a_usage_error(tmp_path: Path, data: object, said: str) -> None:
    file = tmp_path / "space.yaml"
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(UsageError) as caught:
        combine(default_space(SERVICE, "llama.cpp", HOST, (2, 2)), load_space(file),
                "llama.cpp", str(file))  # fmt: skip
    assert said in caught.value.render()


def test_the_vllm_space_and_a_drafter_knob() -> None:
    vllm = SERVICE.model_copy(update={"parallel": 2, "extra_args": []})
    space = default_space(vllm, "vllm", HOST, (2, 2))
    assert space.knobs == {"max_num_batched_tokens": (2048, 8192),
                           "chunked_prefill": ("on", "off"), "max_num_seqs": (2, 4)}  # fmt: skip
    assert current(vllm, "max_num_seqs") == 2  # the service's slots are vLLM's --max-num-seqs
    made = apply(vllm, {"max_num_seqs": 4, "chunked_prefill": "off"})
    assert made == {"parallel": 4, "extra_args": ["--no-enable-chunked-prefill"]}
    assert space.memory  # next to another service, refused (L-52)
    # Another drafter is a key of the speculative block; the baseline has none.
    assert current(SERVICE, "draft_model") is None
    assert apply(SERVICE, {"draft_model": "small", "draft_max": 8}) == {
        "speculative": {"draft_model": "small", "draft_max": 8}
    }


def test_kv_cache_types_only_from_the_models_quality_policy() -> None:
    from inferfleet.fleetfile.fleet import Model

    files = [{"path": "m.gguf", "size": 1, "sha256": "0" * 64}]
    plain = Model.model_validate({"source": {"path": "/m"}, "files": files})
    assert "kv_cache" not in default_space(SERVICE, "llama.cpp", HOST, (2, 2), plain).knobs
    checked = Model.model_validate(
        {
            "source": {"path": "/m"},
            "files": files,
            "kv_cache_allowed": [{"k": "q8_0", "v": "q8_0"}, {"k": "f16", "v": "q8_0"}],
        }
    )
    space = default_space(SERVICE, "llama.cpp", HOST, (2, 2), checked)
    # The declared pair first (the baseline's), then the policy's, nothing else.
    assert space.knobs["kv_cache"] == ("f16/f16", "q8_0/q8_0", "f16/q8_0")
