"""Client configs: what each endpoint promises, in the formats clients read.

Every format carries the same contract (L-26): the context window is the
*per-slot* window (L-25), and ``max_tokens`` plus the compaction threshold
fit inside it; reasoning text is where the runtime puts it (L-45); the
``reasoning_effort`` values map to ones the template accepts (L-46).

- ``providers.json``: inferfleet's own OpenAI-compatible providers file.
- ``litellm.yaml``: a LiteLLM proxy ``model_list``. Self-hosters put LiteLLM
  in front of a fleet as the one OpenAI endpoint (Open WebUI, scripts,
  agents), routing by model name; its ``model_info`` carries the window and
  output limits it enforces before a request reaches a slot.
- ``opencode.json``: an OpenCode provider config. OpenCode is an open-source
  coding agent commonly pointed at llama.cpp/vLLM; it compacts long sessions
  from ``limit.context``/``limit.output``, exactly where a pool-sized window
  overflows a slot (L-25, L-26).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.render.endpoints import (
    compaction_threshold,
    endpoint,
    llm_services,
    reasoning_field,
)

PROVIDERS_SCHEMA = "inferfleet.providers/v1"
OPENCODE_SCHEMA = "https://opencode.ai/config.json"
# OpenCode's `interleaved.field` knows only these two names.
_OPENCODE_FIELDS = {"reasoning_content", "reasoning_details"}


def _reasons(service: Service) -> bool:
    """The endpoint returns reasoning text clients should know about."""
    client = service.client
    return bool(service.reasoning_parser or client.reasoning_effort or client.reasoning_field)


def providers(fleet: Fleet) -> dict[str, Any]:
    entries = []
    for name in llm_services(fleet):
        service = fleet.services[name]
        ep = endpoint(fleet, name)
        entries.append(
            {
                "id": ep.alias,
                "service": name,
                "host": ep.host,
                "runtime": ep.runtime,
                "base_url": ep.base_url,
                "api": "chat" if service.client.chat else "completions",
                "context_window": ep.ctx_per_slot,
                "max_tokens": service.client.max_tokens,
                "compaction_threshold": compaction_threshold(service),
                "concurrency": ep.parallel,
                "input": list(service.client.input),
                "tools": service.client.tools,
                "reasoning_field": reasoning_field(fleet, service),
                "reasoning_effort": dict(service.client.reasoning_effort),
            }
        )
    return {"schema": PROVIDERS_SCHEMA, "providers": entries}


def litellm(fleet: Fleet) -> dict[str, Any]:
    models = []
    for name in llm_services(fleet):
        service = fleet.services[name]
        ep = endpoint(fleet, name)
        info: dict[str, Any] = {
            "mode": "chat" if service.client.chat else "completion",
            "max_input_tokens": compaction_threshold(service),
            "max_output_tokens": service.client.max_tokens,
            "supports_vision": "image" in service.client.input,
            "supports_function_calling": service.client.tools,
            "supports_reasoning": _reasons(service),
        }
        models.append(
            {
                "model_name": ep.alias,
                "litellm_params": {
                    "model": f"openai/{ep.alias}",
                    "api_base": ep.base_url,
                    # Fleet endpoints need no key; the OpenAI client insists on one.
                    "api_key": "none",
                    "max_parallel_requests": ep.parallel,
                },
                "model_info": info,
            }
        )
    return {"model_list": models}


def opencode(fleet: Fleet) -> dict[str, Any]:
    provider: dict[str, Any] = {}
    for name in llm_services(fleet):
        service = fleet.services[name]
        if not service.client.chat:
            continue  # OpenCode speaks chat only
        ep = endpoint(fleet, name)
        window = ep.ctx_per_slot or 0
        limit: dict[str, int] = {"context": window, "output": service.client.max_tokens}
        threshold = compaction_threshold(service)
        if threshold != window - service.client.max_tokens:
            limit["input"] = threshold
        model: dict[str, Any] = {
            "name": f"{ep.alias} ({ep.host})",
            "limit": limit,
            "modalities": {"input": list(service.client.input), "output": ["text"]},
            "attachment": "image" in service.client.input,
            "tool_call": service.client.tools,
            "reasoning": _reasons(service),
        }
        field = reasoning_field(fleet, service)
        if model["reasoning"] and field in _OPENCODE_FIELDS:
            model["interleaved"] = {"field": field}
        if service.client.reasoning_effort:
            model["variants"] = {
                level: {"reasoningEffort": value}
                for level, value in service.client.reasoning_effort.items()
            }
        provider[f"inferfleet-{name}"] = {
            "npm": "@ai-sdk/openai-compatible",
            "name": f"inferfleet {name}",
            "options": {"baseURL": ep.base_url},
            "models": {ep.alias: model},
        }
    return {"$schema": OPENCODE_SCHEMA, "provider": provider}


def providers_json(fleet: Fleet) -> str:
    return json.dumps(providers(fleet), indent=2) + "\n"


def litellm_yaml(fleet: Fleet) -> str:
    text = yaml.safe_dump(litellm(fleet), sort_keys=False, default_flow_style=False, width=100)
    return "# LiteLLM proxy model_list, rendered by inferfleet from the fleet file.\n" + text


def opencode_json(fleet: Fleet) -> str:
    return json.dumps(opencode(fleet), indent=2) + "\n"
