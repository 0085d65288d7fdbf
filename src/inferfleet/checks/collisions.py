"""Collisions between services: what two of them cannot both have.

Two services binding one host:port (a wildcard address included) are refused
when the fleet file is loaded (``fleetfile.refs``); the collisions here need
runtime kinds or the models' declared files:

- two exclusive engines (vLLM, SGLang) on one device: each claims its memory
  share when it starts, and the second finds the device taken (L-32);
- one alias (the model id clients send) served by two services that answer it
  differently: client configs list endpoints by that id (L-26); identical
  replicas of one contract are fine (a LiteLLM proxy balances them);
- two models fetched into one directory on a host with different declared
  files: each fetch rewrites what the other verified (L-09).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

from inferfleet.artifacts.locate import model_dir_on
from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.budget.sizing import engine_devices
from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import HubSource, PathSource, Service
from inferfleet.runtimes.registry import traits


def _llm(ctx: CheckContext) -> Iterator[tuple[str, Service, str]]:
    """(name, service, runtime kind) of every llm service, in fleet order."""
    for name, service in ctx.fleet.services.items():
        if service.kind == "llm" and service.runtime is not None:
            yield name, service, ctx.fleet.runtimes[service.runtime].kind


@rule("exclusive-engines-share-device", "L-32", "error")
def exclusive_engines(ctx: CheckContext) -> Iterator[Hit]:
    """two vLLM/SGLang services on one device: each claims its memory share at start"""
    taken: dict[tuple[str, str], tuple[str, str]] = {}
    for name, service, kind in _llm(ctx):
        if traits(kind).memory_share is None:
            continue
        host = ctx.fleet.hosts[service.host]
        for device in engine_devices(service, host):
            key = (service.host, device.name)
            if key not in taken:
                taken[key] = (name, kind)
                continue
            first, first_kind = taken[key]
            how = "its devices" if service.devices else "the host's first GPU (no devices given)"
            yield Hit(
                name,
                f"services.{name}.devices",
                f"device {device.name!r} of host {service.host!r} runs {first_kind} service "
                f"{first!r} and {kind} service {name!r} (on {how}): each claims its "
                "gpu_memory_utilization share of the device when it starts, so the second "
                "one fails or starves the first",
                "give each vLLM/SGLang service devices of its own (services.X.devices), or "
                "serve both models from one engine",
            )


def _contract(service: Service) -> tuple[object, ...]:
    """What a client sending the alias gets: the model, the window, the client facts."""
    return (service.model, service.ctx_per_slot, service.client.model_dump())


@rule("alias-served-twice", "L-26", "error")
def alias_served_twice(ctx: CheckContext) -> Iterator[Hit]:
    """one alias (the model id clients send) names two services with different contracts"""
    first: dict[str, tuple[str, Service]] = {}
    for name, service, _ in _llm(ctx):
        alias = service.model_id(name)
        if alias not in first:
            first[alias] = (name, service)
            continue
        other, other_service = first[alias]
        if _contract(service) == _contract(other_service):
            continue  # replicas of one contract: a proxy may balance them
        differs = [
            what
            for what, a, b in zip(
                ("model", "ctx_per_slot", "client"),
                _contract(service),
                _contract(other_service),
                strict=True,
            )
            if a != b
        ]
        yield Hit(
            name,
            f"services.{name}.alias",
            f"services {other!r} and {name!r} both serve the model id {alias!r}, with a "
            f"different {', '.join(differs)}: client configs list endpoints by that id, so a "
            "client asking for it gets either contract",
            f"give service {name!r} its own alias (services.{name}.alias), or make the two "
            "identical replicas",
        )


@dataclass(frozen=True)
class _Written:
    model: str
    service: str
    files: tuple[ManifestEntry, ...]


def _folder(name: str, ctx: CheckContext) -> str:
    """The model's folder on its host as the fleet states it (home and cache left symbolic)."""
    model = ctx.fleet.models[name]
    return posixpath.normpath(model_dir_on(name, model, home="~", cache_dir="<cache>"))


@rule("model-dir-shared", "L-09", "error")
def model_dir_shared(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """two models are fetched into one directory of a host with different declared files"""
    fleet = ctx.fleet
    seen: dict[tuple[str, str], _Written] = {}
    reported: set[tuple[str, str]] = set()
    for name, service, _ in _llm(ctx):
        for model_name in service.models_loaded:
            model = fleet.models[model_name]
            if isinstance(model.source, PathSource):
                continue  # files already on the host: inferfleet writes nothing there
            try:
                files = tuple(sorted(declared_files(model, ctx.root), key=lambda f: f.path))
            except FleetError as exc:
                yield Skip(name, f"model {model_name!r}: {exc.message}")
                continue
            key = (service.host, _folder(model_name, ctx))
            written = seen.setdefault(key, _Written(model_name, name, files))
            pair = (written.model, model_name)
            if written.model == model_name or written.files == files or pair in reported:
                continue
            theirs = {f.path: f for f in written.files}
            clash = [f.path for f in files if f.path in theirs and theirs[f.path] != f]
            if not clash and isinstance(model.source, HubSource) and model.source.hf_cache:
                continue  # one cache snapshot per commit holds any subset of the repo's files
            reported.add(pair)
            detail = (
                f"both declare {', '.join(clash)} with different sizes or hashes"
                if clash
                else "their declared files differ"
            )
            yield Hit(
                name,
                f"models.{model_name}.dir",
                f"models {written.model!r} (service {written.service!r}) and {model_name!r} "
                f"(service {name!r}) are both fetched into {key[1]} on host {service.host!r}, "
                f"and {detail}: each fetch and verify works on the other's files",
                f"give model {model_name!r} its own dir (or drop dir: for the default "
                f"<cache>/models/{model_name})",
            )
