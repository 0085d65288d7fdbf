"""Cross-references between the sections of a valid fleet.

Returned as ``(loc, message, hint)`` so the loader can point at the line.
"""

from __future__ import annotations

import ipaddress

from inferfleet.spec.models import Fleet

Loc = tuple[str | int, ...]


def cross_reference_errors(fleet: Fleet) -> list[tuple[Loc, str, str]]:
    errors: list[tuple[Loc, str, str]] = []

    def known(section: str, names: list[str]) -> str:
        return f"known {section}: {', '.join(sorted(names)) or '(none)'}"

    for name, service in fleet.services.items():
        base: Loc = ("services", name)
        host = fleet.hosts.get(service.host)
        if host is None:
            errors.append(
                (
                    (*base, "host"),
                    f"service {name!r} runs on host {service.host!r}, which is not in hosts",
                    known("hosts", list(fleet.hosts)),
                )
            )
        if service.runtime is not None and service.runtime not in fleet.runtimes:
            errors.append(
                (
                    (*base, "runtime"),
                    f"service {name!r} uses runtime {service.runtime!r}, which is not in runtimes",
                    known("runtimes", list(fleet.runtimes)),
                )
            )
        if service.model is not None and service.model not in fleet.models:
            errors.append(
                (
                    (*base, "model"),
                    f"service {name!r} serves model {service.model!r}, which is not in models",
                    known("models", list(fleet.models)),
                )
            )
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
    errors.extend(_port_clashes(fleet))
    return errors


def _port_clashes(fleet: Fleet) -> list[tuple[Loc, str, str]]:
    """One port per host and bind address; a wildcard bind clashes with every address."""
    errors: list[tuple[Loc, str, str]] = []
    taken: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for name, service in fleet.services.items():
        key = (service.host, service.port)
        for other_name, other_bind in taken.get(key, []):
            if _overlap(service.bind, other_bind):
                errors.append(
                    (
                        ("services", name, "port"),
                        f"port {service.port} on host {service.host!r} is already used by "
                        f"service {other_name!r} ({other_bind})",
                        "give each service on a host its own port",
                    )
                )
                break
        taken.setdefault(key, []).append((name, service.bind))
    return errors


def _overlap(a: str, b: str) -> bool:
    if a == b:
        return True
    return ipaddress.ip_address(a).is_unspecified or ipaddress.ip_address(b).is_unspecified
