"""A host's services as llama-swap's ``config.yaml`` (``render --target llama-swap``).

Each service becomes a llama-swap model whose ``cmd`` is the argv of the
one launch pipeline (:func:`inferfleet.render.pipeline.service_launch`, what
``show`` prints and ``up`` runs) with its port replaced by ``${PORT}``:
llama-swap owns the ports of what it starts and proxies to them. Health is
``checkEndpoint``; a swap group becomes a llama-swap group that swaps, its
``idle_unload`` each member's ``ttl``. ``inferfleet import llama-swap``
reads the file back into the same services (ports aside: llama-swap hands
them out from ``startPort`` in sorted model order).

Pure: the fleet and the host's facts in, the file's text and notes out.
"""

from __future__ import annotations

import io
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import LiteralScalarString

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render.facts import HostFacts
from inferfleet.render.pipeline import service_launch

PORT_MACRO = "${PORT}"
_REACHED_BY_LOCALHOST = frozenset({"127.0.0.1", "localhost", "0.0.0.0", "::"})


@dataclass
class LlamaSwapConfig:
    host: str
    text: str
    notes: list[str] = field(default_factory=list)


def cmd_text(argv: list[str], port: int) -> str:
    """The argv as llama-swap's ``cmd``: one flag (and its value) per line, the port a macro."""
    words = list(argv)
    for i in range(len(words) - 1):
        if words[i] == "--port" and words[i + 1] == str(port):
            words[i + 1] = PORT_MACRO
    for word in words:
        if "${" in word and word != PORT_MACRO:
            raise UsageError(
                f"argv word {word!r} contains '${{', which llama-swap expands as a macro",
                hint="rename the path or value so llama-swap passes it unchanged",
            )
    lines: list[list[str]] = [[words[0]]]
    for word in words[1:]:
        last = lines[-1]
        if (
            len(lines) > 1
            and len(last) == 1
            and last[0].startswith("-")
            and not word.startswith("-")
        ):
            last.append(word)
        else:
            lines.append([word])
    return "\n".join(" ".join(_quote(w) for w in line) for line in lines) + "\n"


def _quote(word: str) -> str:
    return word if word == PORT_MACRO else shlex.quote(word)


def render_llama_swap(
    fleet: Fleet, root: Path, host: str, facts: HostFacts, *, origin: str
) -> LlamaSwapConfig:
    """llama-swap's config for the llm services of ``host`` that run as processes; its
    ``text`` is empty when the host has none."""
    result = LlamaSwapConfig(host, "")
    models = CommentedMap()
    groups = CommentedMap()
    timeouts: list[float] = []
    ports: list[int] = []
    for name, service in fleet.services.items():
        if service.host != host:
            continue
        runtime = fleet.runtimes.get(service.runtime or "")
        if service.kind != "llm" or runtime is None or runtime.image is not None:
            result.notes.append(
                f"{name}: runs in a container; llama-swap starts processes (left out)"
            )
            continue
        launch = service_launch(fleet, root, name, facts)
        entry = CommentedMap()
        entry["cmd"] = LiteralScalarString(cmd_text(launch.argv, service.port))
        if service.bind not in _REACHED_BY_LOCALHOST:
            # llama-swap's default proxy is http://localhost:${PORT}: a server bound to one
            # other address is reached there only.
            host_part = f"[{service.bind}]" if ":" in service.bind else service.bind
            entry["proxy"] = f"http://{host_part}:{PORT_MACRO}"
        entry["checkEndpoint"] = service.health.path
        env = {**service.runtime_env, **service.env}
        if env:
            entry["env"] = [f"{k}={v}" for k, v in env.items()]
        alias = service.model_id(name)
        if alias != name:
            entry["aliases"] = [alias]
        if service.secrets_env is not None:
            result.notes.append(
                f"{name}: reads secrets from {service.secrets_env}; llama-swap has no env file: "
                "start llama-swap with them in its environment (its models inherit it)"
            )
        if service.group is not None:
            group = fleet.groups[service.group]
            if group.idle_unload is not None:
                entry["ttl"] = max(1, round(group.idle_unload))
            held = groups.setdefault(service.group, _group(service.group, group.max_loaded, result))
            held["members"].append(name)
        models[name] = entry
        timeouts.append(service.health.timeout)
        ports.append(service.port)
    if not models:
        return result  # nothing llama-swap can start there: no config (the notes say why)
    doc = CommentedMap()
    doc["healthCheckTimeout"] = max(1, round(max(timeouts)))
    doc["startPort"] = min(ports)
    doc["models"] = models
    if groups:
        doc["groups"] = groups
    doc.yaml_set_start_comment(
        f"llama-swap config for host {host}, rendered by `inferfleet render --target "
        f"llama-swap` from {origin}.\nEach cmd is the argv `inferfleet show SERVICE` prints, "
        "its port left to llama-swap (${PORT})."
    )
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    stream = io.StringIO()
    yaml.dump(doc, stream)
    result.text = stream.getvalue()
    return result


def _group(name: str, max_loaded: int, result: LlamaSwapConfig) -> CommentedMap:
    group = CommentedMap()
    # One member at a time is llama-swap's swap; no limit is a group that does not swap.
    group["swap"] = max_loaded == 1
    group["exclusive"] = False  # a fleet group never unloads other services
    group["members"] = []
    if max_loaded > 1:
        result.notes.append(
            f"group {name}: max_loaded {max_loaded} has no llama-swap equivalent (swap loads "
            "one member, no swap loads all)"
        )
    return group
