"""llama-swap's ``groups`` as fleet swap groups (see :mod:`inferfleet.importers.llamaswap`).

A group of llama.cpp members becomes one llama-server router: ``swap: true``
(llama-swap's default) is ``max_loaded: 1``, ``swap: false`` is
``max_loaded: 0`` (members side by side, loaded on demand); a ``ttl`` the
members share is ``idle_unload``. ``exclusive`` (unload other groups) and
``persistent`` have no equivalent and are listed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from inferfleet.importers.llamacpp import model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.yamlsource import item_line, key_line

GROUP_KEYS = frozenset({"swap", "exclusive", "persistent", "members"})


def at_line(path: Path, line: int | None) -> Where:
    return Where(str(path), line)


def mappings(
    path: Path, table: Any, what: str, known: frozenset[str], holds: str, out: Imported
) -> Iterator[tuple[str, Any, Where]]:
    """Each entry of a llama-swap table that is a mapping, with where it stands; another
    entry is a problem, and so is a key llama-swap does not read there."""
    for key, node in table.items():
        at = at_line(path, key_line(table, key))
        if not isinstance(node, dict):
            out.problem(at, f"{what} {key!r} is not a mapping with {holds}")
            continue
        unknown_keys(node, known, f"{what} {key!r}", path, out)
        yield key, node, at


def unknown_keys(node: Any, known: frozenset[str], what: str, path: Path, out: Imported) -> None:
    """A problem for every key of a llama-swap mapping that llama-swap does not read there."""
    for key in node:
        if key not in known:
            out.problem(
                at_line(path, key_line(node, key)),
                f"unknown {what} key {key!r}",
                f"llama-swap's keys here: {', '.join(sorted(known))}",
            )


def read_groups(
    path: Path, doc: Any, names: dict[str, str], ttls: dict[str, int], out: Imported
) -> None:
    groups = doc.get("groups") or {}
    member_of: dict[str, str] = {}
    for group_id, group, where in mappings(path, groups, "group", GROUP_KEYS, "members:", out):
        listed = [str(m) for m in group.get("members") or []]
        for index, member in enumerate(listed):
            at = at_line(path, item_line(group.get("members"), index))
            if member in member_of:
                out.problem(
                    at, f"model {member!r} is in groups {member_of[member]!r} and {group_id!r}"
                )
            elif member not in names:
                out.problem(at, f"group {group_id!r}: member {member!r} is not an imported model")
            member_of[member] = str(group_id)
        services = [names[m] for m in listed if m in names]
        if group.get("exclusive", True):
            out.note(
                where,
                f"groups.{group_id}.exclusive: no equivalent (a fleet group never unloads "
                "other services)",
            )
        if group.get("persistent", False):
            out.note(where, f"groups.{group_id}.persistent: every fleet service is persistent")
        if len(services) < 2:
            for name in services:
                _ttl_note(path, name, ttls, out)
            continue
        # swap: one member at a time; no swap: members load side by side, on demand.
        _fleet_group(str(group_id), services, ttls, where, out, 1 if group.get("swap", True) else 0)
    loose = [n for m, n in names.items() if m not in member_of]
    if len(loose) > 1:
        out.note(
            at_line(path, key_line(doc, "models")),
            f"models in no group ({', '.join(loose)}) swap one at a time in llama-swap; in the "
            "fleet each runs on its own (give them `group:` to swap)",
        )
    for name in loose:
        _ttl_note(path, name, ttls, out)


def _ttl_note(path: Path, name: str, ttls: dict[str, int], out: Imported) -> None:
    if name in ttls:
        out.note(
            out.services[name].where,
            f"{name}: ttl {ttls[name]}s has no equivalent outside a swap group (it stays loaded)",
        )


def _fleet_group(
    group_id: str,
    services: list[str],
    ttls: dict[str, int],
    where: Where,
    out: Imported,
    max_loaded: int,
) -> None:
    """A llama-swap group of llama.cpp members: one router, its members loaded on demand."""
    name = model_name(group_id)
    if name in out.services:
        out.problem(where, f"group {group_id!r} has the name of a service", "rename the group")
        return
    group: dict[str, Any] = {"max_loaded": max_loaded}
    times = {ttls.get(s, 0) for s in services}
    if len(times) == 1 and times != {0}:
        group["idle_unload"] = f"{times.pop()}s"
    elif len(times) > 1:
        out.note(
            where, f"groups.{group_id}: members' ttl differ; the fleet group has one idle_unload"
        )
    first = out.services[services[0]].block
    for member in services:
        block = out.services[member].block
        block["group"] = name
        # One router process: the members share its address and port.
        block["port"] = first["port"]
        if "bind" in first:
            block["bind"] = first["bind"]
        out.services[member].explained["--port"] = (
            f"served through the group's router on port {first['port']}"
        )
    out.groups[name] = group
