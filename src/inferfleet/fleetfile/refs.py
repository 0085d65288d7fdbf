"""Cross-references between the sections of a valid fleet.

Returned as ``(loc, message, hint)`` so the loader can point at the line.
"""

from __future__ import annotations

import ipaddress

from inferfleet.fleetfile.base import Loc, Ref, absent, known
from inferfleet.fleetfile.exposure import is_ip
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import group_errors
from inferfleet.fleetfile.rpc import rpc_errors, worker_address


def cross_reference_errors(fleet: Fleet) -> list[Ref]:
    errors: list[Ref] = []
    for name, service in fleet.services.items():
        base: Loc = ("services", name)
        host = fleet.hosts.get(service.host)
        if host is None:
            said = f"service {name!r} runs on host {service.host!r}"
            errors.append(absent((*base, "host"), said, "hosts", fleet.hosts))
        if service.runtime is not None and service.runtime not in fleet.runtimes:
            said = f"service {name!r} uses runtime {service.runtime!r}"
            errors.append(absent((*base, "runtime"), said, "runtimes", fleet.runtimes))
        if service.model is not None and service.model not in fleet.models:
            said = f"service {name!r} serves model {service.model!r}"
            errors.append(absent((*base, "model"), said, "models", fleet.models))
        if host is not None:
            device_names = [d.name for d in host.devices]
            for index, device in enumerate(service.devices):
                if device not in device_names:
                    errors.append(
                        (
                            (*base, "devices", index),
                            f"device {device!r} is not a device of host {service.host!r}",
                            known(f"devices of {service.host}", device_names),
                        )
                    )
        errors.extend(_option_refs(fleet, name))
    errors.extend(_main_refs(fleet))
    errors.extend(_front_refs(fleet))
    errors.extend(_kubernetes_refs(fleet))
    errors.extend(_port_clashes(fleet))
    errors.extend(group_errors(fleet))
    errors.extend(rpc_errors(fleet))
    return errors


def _kubernetes_refs(fleet: Fleet) -> list[Ref]:
    """The kubernetes section's images name runtimes and its volumes name models."""
    target = fleet.kubernetes
    if target is None:
        return []
    errors: list[Ref] = []
    for name in target.images:
        if name not in fleet.runtimes:
            said = f"kubernetes.images names runtime {name!r}"
            errors.append(absent(("kubernetes", "images", name), said, "runtimes", fleet.runtimes))
        elif fleet.runtimes[name].image is not None:
            errors.append(
                (
                    ("kubernetes", "images", name),
                    f"runtime {name!r} already runs from image {fleet.runtimes[name].image!r}",
                    "drop it from kubernetes.images: the runtime's own image is exported",
                )
            )
    for name in target.volumes:
        if name not in fleet.models:
            said = f"kubernetes.volumes names model {name!r}"
            errors.append(absent(("kubernetes", "volumes", name), said, "models", fleet.models))
    return errors


def _front_refs(fleet: Fleet) -> list[Ref]:
    """The gateway's, the proxy's and Prometheus' hosts and the services they front exist."""
    errors: list[Ref] = []
    llm = [n for n, s in fleet.services.items() if s.kind == "llm"]
    fronts: list[tuple[str, str, list[str], list[str], str]] = []
    if fleet.gateway is not None:
        gateway = fleet.gateway
        fronts.append(("gateway", gateway.host, gateway.services or [], llm, "llm services"))
        for name in gateway.timeouts:
            fronted = gateway.services if gateway.services is not None else llm
            if name not in fronted:
                errors.append(
                    (
                        ("gateway", "timeouts", name),
                        f"the gateway has a timeout for {name!r}, which it does not front",
                        known("services it fronts", fronted),
                    )
                )
    if fleet.proxy is not None:
        proxy = fleet.proxy
        services = list(fleet.services)
        fronts.append(("proxy", proxy.host, proxy.services, services, "services"))
    for section, host, names, allowed, what in fronts:
        if host not in fleet.hosts:
            said = f"the {section} runs on host {host!r}"
            errors.append(absent((section, "host"), said, "hosts", fleet.hosts))
        for index, name in enumerate(names):
            if name not in allowed:
                errors.append(
                    (
                        (section, "services", index),
                        f"the {section} fronts {name!r}, which is not one of the fleet's {what}",
                        known(what, allowed),
                    )
                )
    site = fleet.monitoring.prometheus if fleet.monitoring is not None else None
    if site is not None and site.host not in fleet.hosts:
        said = f"Prometheus runs on host {site.host!r}"
        errors.append(absent(("monitoring", "prometheus", "host"), said, "hosts", fleet.hosts))
    return errors


def _main_refs(fleet: Fleet) -> list[Ref]:
    """A model's ``main`` is one of its declared files, so it is fetched and verified (L-09).

    Manifest models are checked where the manifest is read (artifacts.locate).
    """
    errors: list[Ref] = []
    for name, model in fleet.models.items():
        declared = [f.path for f in model.files]
        if model.main is not None and model.files and model.main not in declared:
            errors.append(
                (
                    ("models", name, "main"),
                    f"main file {model.main!r} is not a declared file of model {name!r}",
                    "declare it under the model's files (size, sha256) so it is fetched and "
                    f"verified; declared: {', '.join(declared)}",
                )
            )
    return errors


def _option_refs(fleet: Fleet, name: str) -> list[Ref]:
    """Names inside a service's options: drafter model and device, override targets, mmproj."""
    service = fleet.services[name]
    base: Loc = ("services", name)
    errors: list[Ref] = []
    host = fleet.hosts.get(service.host)
    device_names = [] if host is None else [d.name for d in host.devices]
    spec = service.speculative
    if spec is not None and spec.draft_model is not None and spec.draft_model not in fleet.models:
        errors.append(
            (
                (*base, "speculative", "draft_model"),
                f"draft model {spec.draft_model!r} is not in models",
                known("models", fleet.models),
            )
        )
    draft_device = None if spec is None else spec.draft_device
    if host is not None and draft_device is not None and draft_device not in device_names:
        errors.append(
            (
                (*base, "speculative", "draft_device"),
                f"draft device {draft_device!r} is not a device of host {service.host!r}",
                known(f"devices of {service.host}", device_names),
            )
        )
    if host is not None:
        for index, override in enumerate(service.tensor_overrides):
            if override.device != "CPU" and override.device not in device_names:
                errors.append(
                    (
                        (*base, "tensor_overrides", index, "device"),
                        f"tensor override target {override.device!r} is neither CPU nor a "
                        f"device of host {service.host!r}",
                        known(f"targets on {service.host}", ["CPU", *device_names]),
                    )
                )
    runtime = fleet.runtimes.get(service.runtime or "")
    needs_image = service.backend == "quadlet" and service.kind == "llm"
    if needs_image and runtime is not None and runtime.image is None:
        errors.append(
            (
                (*base, "backend"),
                f"service {name!r} uses backend quadlet, but runtime {service.runtime!r} "
                "has no container image",
                "give the runtime an image (pinned by digest), or use backend systemd",
            )
        )
    model = fleet.models.get(service.model or "")
    if service.mmproj is not None and model is not None and model.files:
        declared = [f.path for f in model.files]
        if service.mmproj not in declared:
            errors.append(
                (
                    (*base, "mmproj"),
                    f"projector {service.mmproj!r} is not a declared file of model "
                    f"{service.model!r}",
                    "declare it under the model's files (size, sha256) so it is fetched and "
                    f"verified; declared: {', '.join(declared)}",
                )
            )
    return errors


def _port_clashes(fleet: Fleet) -> list[Ref]:
    """One port per host and bind address; a wildcard bind clashes with every address."""
    errors: list[Ref] = []
    taken: dict[tuple[str, int], list[tuple[str, str]]] = {}
    # (where, what, host, bind, port, swap group): a group's members share its router's port
    listeners: list[tuple[Loc, str, str, str, int, str | None]] = [
        (("services", name), f"service {name!r}", s.host, s.bind, s.port, s.group)
        for name, s in fleet.services.items()
    ]
    for name, s in fleet.services.items():
        for index, worker in enumerate(s.rpc):
            address = worker_address(fleet, worker) if worker.host in fleet.hosts else ""
            if is_ip(address):  # a name is refused by the exposure rule (rpc-worker-bind)
                what = f"rpc worker {index} of service {name!r}"
                where: Loc = ("services", name, "rpc", index)
                listeners.append((where, what, worker.host, address, worker.port, None))
    for section in ("gateway", "proxy"):
        front = getattr(fleet, section)
        if front is not None:
            listeners.append(
                ((section,), f"the {section}", front.host, front.bind, front.port, None)
            )
    taken_groups: dict[tuple[str, int], list[str | None]] = {}
    for loc, what, host, bind, port, group in listeners:
        key = (host, port)
        for (other, other_bind), other_group in zip(
            taken.get(key, []), taken_groups.get(key, []), strict=True
        ):
            if group is not None and other_group == group:
                continue  # a swap group's members share its one router's port
            if _overlap(bind, other_bind):
                errors.append(
                    (
                        (*loc, "port"),
                        f"port {port} on host {host!r} is already used by {other} ({other_bind})",
                        "give each service on a host its own port",
                    )
                )
                break
        taken.setdefault(key, []).append((what, bind))
        taken_groups.setdefault(key, []).append(group)
    return errors


def _overlap(a: str, b: str) -> bool:
    """Whether two bind addresses take the same port: one address however written
    (``::1`` and ``0:0::1``, ``::ffff:10.0.0.1`` and ``10.0.0.1``), or a wildcard
    over it (``0.0.0.0`` takes every IPv4 address; ``::`` every address, since
    Linux binds it dual-stack by default)."""
    x, y = _address(a), _address(b)
    if x == y:
        return True
    return any(
        wild.is_unspecified and (wild.version == 6 or other.version == 4)
        for wild, other in ((x, y), (y, x))
    )


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
