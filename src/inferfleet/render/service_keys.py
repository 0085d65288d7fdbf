"""Which servers require an API key, the variable each reads it from, and the name the
fronts hold it under (L-58). Pure: the fleet in, names out.

A server that binds beyond loopback answers whoever reaches its port, so it
requires a key. The key is never in argv (``/proc/<pid>/cmdline`` is world
readable, L-06): the server reads it from its environment, loaded from the
service's ``secrets_env`` file. llama-server b11434 reads ``LLAMA_API_KEY``
(every route but ``/health`` and ``/v1/health`` then answers 401 without
it), vLLM reads ``VLLM_API_KEY`` (its ``/v1`` routes); SGLang takes its key
from argv only, so it stays on loopback behind the gateway or the proxy.

Everything inferfleet sends to such a server carries the key: the contract
gate, ``probe``, ``bench`` and ``status`` (:mod:`inferfleet.client.keys`),
the gateway's backend entry and the auth proxy's upstream (from their key
files), Prometheus' scrape (a credentials file), each under
:func:`front_variable`'s name.
"""

from __future__ import annotations

import re

from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.fleetfile.groups import unit_service
from inferfleet.render.exposure import is_loopback
from inferfleet.runtimes.registry import traits

# Prometheus reads a keyed service's key from this file, next to its config (mode 600).
SCRAPE_KEY_DIR = "keys"


def key_variable(fleet: Fleet, name: str) -> str | None:
    """The variable unit ``name``'s server reads its key from (None: it reads none); a
    group's router and an RPC worker are judged as the service they run as."""
    service = unit_service(fleet, name)
    if service.kind != "llm" or service.runtime is None:
        return None
    return traits(fleet.runtimes[service.runtime].kind).key_env


def keyed(fleet: Fleet, name: str) -> bool:
    """Whether unit ``name`` requires a key: an LLM server bound beyond loopback."""
    return requires_key(unit_service(fleet, name))


def requires_key(service: Service) -> bool:
    return service.kind == "llm" and not is_loopback(service.bind)


def front_variable(name: str) -> str:
    """The variable that holds service ``name``'s key outside its host: in the gateway's
    and the proxy's key files, and in the environment of whoever runs inferfleet."""
    return "INFERFLEET_KEY_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def scrape_key_file(name: str) -> str:
    """Where Prometheus reads service ``name``'s key, relative to its config file."""
    return f"{SCRAPE_KEY_DIR}/{name}.key"
