"""Client configs carry the per-slot contract (L-25, L-26, L-45, L-46) in every format."""

from __future__ import annotations

import json

import yaml
from render_helpers import load, render

from inferfleet.render import clients


def artifact(fleet: str, path: str) -> str:
    (found,) = [a.content for a in render(fleet) if a.path == path]
    return found


def test_providers_file_is_the_per_slot_contract() -> None:
    doc = json.loads(artifact("homelab", "clients/providers.json"))
    assert doc["schema"] == "inferfleet.providers/v1"
    by_id = {p["id"]: p for p in doc["providers"]}
    coder = by_id["qwen3-coder-30b"]
    # 32768 per slot over 3 slots: clients get the slot, never the 98304 pool (L-25).
    assert coder["context_window"] == 32768 and coder["concurrency"] == 3
    # The gateway fronts every llm service of homelab and the auth proxy fronts the
    # gateway: the client's URL is the proxy's name, which a laptop reaches (TLS, a key),
    # never the gateway's loopback address.
    assert coder["base_url"] == "https://ai.home.arpa/v1" and coder["via_gateway"] is True
    assert coder["via_proxy"] is True
    assert coder["max_tokens"] + coder["compaction_threshold"] <= coder["context_window"]  # L-26
    vision = by_id["qwen3.5-35b-a3b"]
    assert vision["input"] == ["text", "image"]
    assert vision["reasoning_field"] == "reasoning_content"  # llama.cpp (L-45)
    assert vision["reasoning_effort"] == {"low": "low", "medium": "medium", "high": "high"}
    chat = by_id["qwen3-30b-a3b"]
    assert chat["reasoning_field"] == "reasoning"  # vLLM (L-45)
    assert chat["compaction_threshold"] == 65536 - 8192  # default: window - max_tokens
    assert set(by_id) == {"qwen3-coder-30b", "qwen3.5-35b-a3b", "qwen3-30b-a3b"}  # llm only


def test_litellm_model_list() -> None:
    doc = yaml.safe_load(artifact("homelab", "clients/litellm.yaml"))
    entries = {m["model_name"]: m for m in doc["model_list"]}
    coder = entries["qwen3-coder-30b"]
    assert coder["litellm_params"]["model"] == "openai/qwen3-coder-30b"
    assert coder["litellm_params"]["api_base"] == "https://ai.home.arpa/v1"  # the proxy
    # The key is read from the client's environment at start, never written here (L-55).
    assert coder["litellm_params"]["api_key"] == "os.environ/INFERFLEET_PROXY_KEY"
    assert coder["litellm_params"]["max_parallel_requests"] == 3
    info = coder["model_info"]
    assert info["max_input_tokens"] == 20000 and info["max_output_tokens"] == 8192
    assert info["max_input_tokens"] + info["max_output_tokens"] <= 32768
    assert info["supports_function_calling"] is True
    assert entries["qwen3.5-35b-a3b"]["model_info"]["supports_vision"] is True


def test_opencode_providers() -> None:
    doc = json.loads(artifact("homelab", "clients/opencode.json"))
    assert doc["$schema"] == "https://opencode.ai/config.json"
    # One provider for the front door holds every fronted model (homelab: all of them).
    assert set(doc["provider"]) == {"inferfleet"}
    front = doc["provider"]["inferfleet"]
    assert front["npm"] == "@ai-sdk/openai-compatible"
    assert front["options"] == {
        "baseURL": "https://ai.home.arpa/v1",
        "apiKey": "{env:INFERFLEET_PROXY_KEY}",
    }
    model = front["models"]["qwen3-coder-30b"]
    # OpenCode compacts from limit.input when it is below context - output.
    assert model["limit"] == {"context": 32768, "output": 8192, "input": 20000}
    assert model["tool_call"] is True
    vision = front["models"]["qwen3.5-35b-a3b"]
    assert vision["modalities"]["input"] == ["text", "image"] and vision["attachment"] is True
    assert vision["interleaved"] == {"field": "reasoning_content"}  # L-45
    assert vision["variants"]["high"] == {"reasoningEffort": "high"}  # L-46


def test_reasoning_effort_map_reaches_the_variants() -> None:
    """L-46: the client's level is sent as the value the template accepts."""
    doc = clients.opencode(load("runtimes").fleet)
    sg = doc["provider"]["inferfleet-sg"]["models"]["qwen2.5-coder-7b"]
    assert sg["variants"] == {
        "low": {"reasoningEffort": "low"},
        "high": {"reasoningEffort": "xhigh"},
    }
    assert sg["reasoning"] is True


def test_completion_only_endpoints_are_not_offered_as_chat() -> None:
    fleet = load("local").fleet
    service = fleet.services["gemma"]
    completion = service.model_copy(
        update={"client": service.client.model_copy(update={"chat": False})}
    )
    changed = fleet.model_copy(update={"services": {"gemma": completion}})
    assert clients.opencode(changed)["provider"] == {}  # OpenCode speaks chat only
    (entry,) = clients.providers(changed)["providers"]
    assert entry["api"] == "completions"
    assert clients.litellm(changed)["model_list"][0]["model_info"]["mode"] == "completion"
