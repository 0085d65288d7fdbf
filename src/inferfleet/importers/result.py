"""What an importer hands back: fleet-file blocks, notes and problems, each with file:line."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from inferfleet.errors import SpecError, SpecErrors


def free_name(base: str, taken: Container[Any]) -> str:
    """``base``, or suffixed (``-2``, ``-3`` ...) until ``taken`` does not hold it."""
    name, count = base, 1
    while name in taken:
        count += 1
        name = f"{base[:60]}-{count}"
    return name


@dataclass(frozen=True)
class Where:
    """A place in the imported file (1-based line)."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Note:
    """Something of the source with no equivalent in the fleet, or changed on the way in."""

    where: Where
    text: str


@dataclass
class ImportedService:
    name: str
    block: dict[str, Any]  # the services.NAME block
    original: list[str]  # the command line as the other tool ran it (macros expanded)
    where: Where
    # Differences between the original and the rendered argv that the import made on
    # purpose, by flag: why (compare.py reports them as explained, not as mismatches).
    explained: dict[str, str] = field(default_factory=dict)
    kind: str = "llama.cpp"  # the runtime, whose flag table compares the argv
    program: int = 1  # words that start the server (``vllm serve``: 2)


@dataclass
class Imported:
    """Blocks to add to a fleet file, by section, and what did not come across."""

    host: str
    services: dict[str, ImportedService] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    problems: list[SpecError] = field(default_factory=list)
    # Hub models to list (model name -> the reference as written, REPO:TAG), with where.
    hub_refs: dict[str, tuple[str, Where]] = field(default_factory=dict)

    def note(self, where: Where, text: str) -> None:
        self.notes.append(Note(where, text))

    def problem(self, where: Where, message: str, hint: str = "") -> None:
        self.problems.append(SpecError(message, path=where.path, line=where.line, hint=hint))

    def port_clashes(self, taken: dict[tuple[str, int], str]) -> None:
        """Two servers on one port of one host (members of one group share their router's):
        a problem with the line. ``taken``: (host, port) -> service, of the fleet already."""
        held = dict(taken)
        for name, service in self.services.items():
            key = (str(service.block["host"]), int(service.block["port"]))
            group = service.block.get("group")
            owner = held.get(key)
            if owner == name:
                continue  # the same service imported again: the merge says so by name
            if owner is None or (group is not None and owner == f"group {group}"):
                held[key] = f"group {group}" if group is not None else name
                continue
            self.problem(
                service.where,
                f"{name} listens on port {key[1]} of host {key[0]}, as {owner} does",
                "give one of them another port",
            )

    def raise_problems(self) -> None:
        """Every problem at once, sorted by line: nothing is written when there is one."""
        if self.problems:
            self.problems.sort(key=lambda e: e.line or 0)
            raise SpecErrors(self.problems) if len(self.problems) > 1 else self.problems[0]
