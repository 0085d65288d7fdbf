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
- ``opencode.json``: an OpenCode provider config: the coding-agent format.
  OpenCode is an open-source coding agent commonly pointed at llama.cpp/vLLM,
  and the one whose config carries the whole contract: it compacts long
  sessions from ``limit.context``/``limit.output``, exactly where a
  pool-sized window overflows a slot (L-25, L-26), and it reads the key from
  the environment (``{env:NAME}``), so the file holds none (L-55).
- ``openwebui.env``: Open WebUI's ``OPENAI_API_BASE_URLS`` /
  ``OPENAI_API_KEYS`` (``;``-separated, one key per URL, in order).

With a gateway every format points at the front door for the
services it fronts: one base URL, one key (:data:`GATEWAY_KEY_ENV` in the
client's environment; the gateway's ``LITELLM_MASTER_KEY``). With an auth
proxy, clients are given the proxy's address (TLS, reachable from a laptop)
for everything it routes, with :data:`PROXY_KEY_ENV`. A key is never
written into a rendered file (L-55); Open WebUI does not expand variables in
its settings (L-54), so its snippet carries a placeholder to replace when it
is installed.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.render.endpoints import (
    client_base_url,
    compaction_threshold,
    endpoint,
    gateway_url,
    llm_services,
    proxy_url,
    reasoning_field,
    via_proxy,
)
from inferfleet.render.exposure import gateway_services
from inferfleet.render.service_keys import front_variable, keyed

PROVIDERS_SCHEMA = "inferfleet.providers/v1"
OPENCODE_SCHEMA = "https://opencode.ai/config.json"
# OpenCode's `interleaved.field` knows only these two names.
_OPENCODE_FIELDS = {"reasoning_content", "reasoning_details"}
# Where a client keeps the gateway's key: its own environment, never a rendered file (L-55).
GATEWAY_KEY_ENV = "INFERFLEET_GATEWAY_KEY"
# ... and the auth proxy's: one of the keys its keys_env accepts (the same name there).
PROXY_KEY_ENV = "INFERFLEET_PROXY_KEY"
OPENWEBUI_KEY_PLACEHOLDER = "REPLACE-WITH-THE-GATEWAY-KEY"
OPENWEBUI_PROXY_PLACEHOLDER = "REPLACE-WITH-THE-PROXY-KEY"
# Fleet endpoints need no key; the OpenAI client insists on one.
NO_KEY = "none"


def key_env(fleet: Fleet, name: str) -> str | None:
    """The variable a client keeps its key for ``name`` in: the auth proxy's when it
    routes the service, the gateway's when that fronts it, the service's own when it is
    reached directly beyond loopback (L-58), else none (no key)."""
    if via_proxy(fleet, name):
        return PROXY_KEY_ENV
    if name in gateway_services(fleet):
        return GATEWAY_KEY_ENV
    return front_variable(name) if keyed(fleet, name) else None


def _reasons(service: Service) -> bool:
    """The endpoint returns reasoning text clients should know about."""
    client = service.client
    return bool(service.reasoning_parser or client.reasoning_effort or client.reasoning_field)


def providers(fleet: Fleet) -> dict[str, Any]:
    entries = []
    fronted = set(gateway_services(fleet))
    for name in llm_services(fleet):
        service = fleet.services[name]
        ep = endpoint(fleet, name)
        entries.append(
            {
                "id": ep.alias,
                "service": name,
                "host": ep.host,
                "runtime": ep.runtime,
                "base_url": client_base_url(fleet, name),
                "via_gateway": name in fronted,
                "via_proxy": via_proxy(fleet, name),
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


def model_entry(fleet: Fleet, name: str, *, api_base: str, api_key: str = NO_KEY) -> dict[str, Any]:
    """One LiteLLM ``model_list`` entry: the alias, where it is served, and its contract
    (per-slot window, L-25; max_tokens and the compaction threshold inside it, L-26).
    The client config and the gateway's own config both take their entries from here."""
    service = fleet.services[name]
    ep = endpoint(fleet, name)
    info: dict[str, Any] = {
        "mode": "chat" if service.client.chat else "completion",
        "max_tokens": service.client.max_tokens,
        "max_input_tokens": compaction_threshold(service),
        "max_output_tokens": service.client.max_tokens,
        "context_window": ep.ctx_per_slot or 0,
        "supports_vision": "image" in service.client.input,
        "supports_function_calling": service.client.tools,
        "supports_reasoning": _reasons(service),
    }
    return {
        "model_name": ep.alias,
        "litellm_params": {
            "model": f"openai/{ep.alias}",
            "api_base": api_base,
            "api_key": api_key,
            "max_parallel_requests": ep.parallel,
        },
        "model_info": info,
    }


def litellm(fleet: Fleet) -> dict[str, Any]:
    """A LiteLLM ``model_list`` for a client-side LiteLLM: through the gateway when there is
    one (its key read from the environment at start, ``os.environ/``), else direct."""
    models = []
    for name in llm_services(fleet):
        env = key_env(fleet, name)
        key = NO_KEY if env is None else f"os.environ/{env}"
        models.append(model_entry(fleet, name, api_base=client_base_url(fleet, name), api_key=key))
    return {"model_list": models}


def openwebui(fleet: Fleet) -> dict[str, str]:
    """Open WebUI's OpenAI connections: the front door once (the auth proxy's address when
    there is one, else the gateway's), plus every service it does not front."""
    fronted = set(gateway_services(fleet))
    urls: list[str] = []
    keys: list[str] = []
    front = gateway_url(fleet)
    if front is not None and fronted:
        door = proxy_url(fleet)
        urls.append(front if door is None else f"{door}/v1")
        keys.append(OPENWEBUI_KEY_PLACEHOLDER if door is None else OPENWEBUI_PROXY_PLACEHOLDER)
    for name in llm_services(fleet):
        if name in fronted:
            continue
        urls.append(client_base_url(fleet, name))
        keys.append(
            OPENWEBUI_PROXY_PLACEHOLDER
            if via_proxy(fleet, name)
            else f"REPLACE-WITH-{front_variable(name)}"
            if keyed(fleet, name)
            else NO_KEY
        )
    return {"OPENAI_API_BASE_URLS": ";".join(urls), "OPENAI_API_KEYS": ";".join(keys)}


def openwebui_env(fleet: Fleet) -> str:
    lines = [
        "# Open WebUI's OpenAI-compatible connections, rendered by inferfleet.",
        "# OPENAI_API_KEYS holds one key per URL, in order. Open WebUI does not expand",
        f"# variables here (L-54): replace {OPENWEBUI_KEY_PLACEHOLDER} with the gateway's",
        f"# key (LITELLM_MASTER_KEY of its keys_env) and {OPENWEBUI_PROXY_PLACEHOLDER} with a key",
        "# of the auth proxy's keys_env where this file is installed, never in git.",
    ]
    lines += [f"{key}={value}" for key, value in openwebui(fleet).items()]
    return "\n".join(lines) + "\n"


def opencode(fleet: Fleet) -> dict[str, Any]:
    provider: dict[str, Any] = {}
    fronted = set(gateway_services(fleet))
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
        if name in fronted:
            # One provider for the front door, every fronted model in it.
            gateway = provider.setdefault(
                "inferfleet",
                {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "inferfleet gateway",
                    "options": {
                        "baseURL": client_base_url(fleet, name),
                        "apiKey": f"{{env:{key_env(fleet, name)}}}",
                    },
                    "models": {},
                },
            )
            gateway["models"][ep.alias] = model
            continue
        options = {"baseURL": client_base_url(fleet, name)}
        if (env := key_env(fleet, name)) is not None:
            options["apiKey"] = f"{{env:{env}}}"
        provider[f"inferfleet-{name}"] = {
            "npm": "@ai-sdk/openai-compatible",
            "name": f"inferfleet {name}",
            "options": options,
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
