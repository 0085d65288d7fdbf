"""The endpoint parsers, on answers captured from the real llama-server and on hostile ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferfleet.client import reports
from inferfleet.client.reports import AnswerError

DATA = Path(__file__).parent / "data"


def load(name: str) -> object:
    return json.loads((DATA / name).read_text())


def test_metrics_of_the_real_server_while_it_generates() -> None:
    series = reports.metrics((DATA / "llamacpp_metrics_busy.txt").read_text())
    assert series["llamacpp:requests_processing"] == 1
    assert series["llamacpp:requests_deferred"] == 0
    assert "llamacpp:tokens_predicted_total" in series


def test_labelled_series_are_summed_over_their_label_sets() -> None:
    # vLLM labels every series with the model name; quoted values may hold spaces and braces.
    text = (
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{model_name="a b}"} 2.0\n'
        'vllm:num_requests_waiting{model_name="c\\"d"} 3 1712345678\n'
        'vllm:num_requests_running{model_name="x"} NaN\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="x"} 7\n'
    )
    series = reports.metrics(text)
    assert series["vllm:num_requests_waiting"] == 5.0
    assert "vllm:num_requests_running" not in series  # NaN is no sample
    assert series["vllm:e2e_request_latency_seconds_bucket"] == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<html><body>Bad gateway</body></html>", "does not start with a series name"),
        ('llamacpp:x{a="1" 3', "unterminated label set"),
        ("llamacpp:requests_deferred zero", "not a number"),
        ("llamacpp:requests_deferred", "is not `name value`"),
        ("llamacpp:requests_deferred 1 2 3", "is not `name value`"),
    ],
)
def test_a_body_that_is_not_prometheus_text_is_an_error_not_zeros(text: str, message: str) -> None:
    with pytest.raises(AnswerError, match=message):
        reports.metrics(text)


def test_a_runaway_metrics_body_is_refused() -> None:
    with pytest.raises(AnswerError, match="more than any runtime sends"):
        reports.metrics("a 1\n" * (reports.MAX_METRICS_BYTES // 4 + 1))


def test_slots_of_an_idle_and_of_a_busy_server() -> None:
    idle = reports.slots(load("llamacpp_slots_idle.json"))
    busy = reports.slots(load("llamacpp_slots_busy.json"))
    assert (idle.total, idle.busy, idle.ctx_per_slot) == (2, 0, 4096)
    assert (busy.total, busy.busy, busy.ctx_per_slot) == (2, 1, 4096)


def test_slots_with_different_windows_report_the_smallest() -> None:
    # The per-slot window is the client contract (L-25): promise what every slot holds.
    usage = reports.slots(
        [{"is_processing": False, "n_ctx": 4096}, {"is_processing": True, "n_ctx": 2048}]
    )
    assert usage.ctx_per_slot == 2048


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"slots": []}, "not a non-empty list"),
        ([], "not a non-empty list"),
        (["x"], "entry 0 is not an object"),
        ([{"n_ctx": 4096}], "no boolean is_processing"),
        ([{"is_processing": "yes"}], "no boolean is_processing"),
    ],
)
def test_hostile_slots_answers(data: object, message: str) -> None:
    with pytest.raises(AnswerError, match=message):
        reports.slots(data)


def test_props_and_models_of_the_real_server() -> None:
    props = reports.llamacpp_props(load("llamacpp_props.json"))
    models = reports.openai_models(load("llamacpp_models.json"))
    assert props.version == "b11434-b11434"
    assert props.slots == 2
    assert models.model == "gemma3-270m"
    assert models.ctx_per_slot == 4096  # llama.cpp: meta.n_ctx is the per-slot window
    merged = reports.merge(props, models)
    assert (merged.version, merged.model, merged.ctx_per_slot, merged.slots) == (
        "b11434-b11434",
        "gemma3-270m",
        4096,
        2,
    )


def test_vllm_models_and_version() -> None:
    models = reports.openai_models(
        {"object": "list", "data": [{"id": "qwen", "max_model_len": 32768}]}
    )
    assert (models.model, models.ctx_per_slot) == ("qwen", 32768)
    assert reports.release_version({"version": "0.9.2"}, "/version").version == "0.9.2"
    with pytest.raises(AnswerError, match="/version is not an object"):
        reports.release_version(["0.9.2"], "/version")


def test_the_named_model_else_the_only_one_and_never_a_placeholder_window() -> None:
    # One reading for status, probe and the contract gate: the model clients ask for,
    # its window from llama.cpp's meta.n_ctx or vLLM's max_model_len (L-25).
    listing = {
        "data": [
            {"id": "router-member", "meta": {"n_ctx": 0}},  # a router's placeholder
            {"id": "chat", "meta": {"n_ctx": 4096}, "max_model_len": 9999},
            {"id": "qwen", "max_model_len": 32768},
        ]
    }
    chat = reports.openai_models(listing, "chat")
    assert (chat.model, chat.ctx_per_slot) == ("chat", 4096)
    assert chat.models == ("router-member", "chat", "qwen")
    assert reports.openai_models(listing, "qwen").ctx_per_slot == 32768
    assert reports.openai_models(listing, "router-member").ctx_per_slot is None
    # Not listed among several: no window is read from another model.
    assert reports.openai_models(listing, "absent").ctx_per_slot is None
    # Not listed, but the only model served: its window.
    only = reports.openai_models({"data": [{"id": "x", "max_model_len": 2048}]}, "y")
    assert (only.model, only.ctx_per_slot) == ("x", 2048)
    assert (
        reports.openai_models({"data": [{"id": "x", "meta": {"n_ctx": True}}]}).ctx_per_slot is None
    )


def test_props_window_is_the_default_generation_settings_n_ctx() -> None:
    assert reports.llamacpp_props(load("llamacpp_props.json")).ctx_per_slot == 4096
    router = {"role": "router", "default_generation_settings": {"n_ctx": 0}}
    assert reports.llamacpp_props(router).ctx_per_slot is None


def test_models_without_entries_and_broken_models() -> None:
    assert reports.openai_models({"data": []}) == reports.ServerInfo(models=())
    with pytest.raises(AnswerError, match="no data list"):
        reports.openai_models({"models": []})


def test_json_that_is_not_json() -> None:
    with pytest.raises(AnswerError, match="/slots is not JSON"):
        reports.load_json(b"<html>", "/slots")


@pytest.mark.parametrize(
    ("status", "state"),
    [(200, "healthy"), (503, "loading"), (404, "unhealthy"), (500, "unhealthy")],
)
def test_health_states(status: int, state: str) -> None:
    # 503 while the model loads is not a failure (L-34).
    assert reports.health_state(status) == state
