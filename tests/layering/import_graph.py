"""The import graph of a source tree, read with ``ast`` (nothing is imported or run).

Two rules of the layout (design.md, "Package layout") are
checked over it:

- no import cycle between the first-level units of the package (its
  subpackages and top modules: ``hub``, ``models``, ``errors``, ...);
- the pure core imports no effect, directly or through any module of the
  package it imports, transitively.

Every import counts, also one inside a function (it runs when the function
does, and it ties the packages together all the same); only imports under
``if TYPE_CHECKING:`` are left out, because they never run. Importing
``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so those
edges are in the graph too.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen from the importing module."""

    source: str  # importing module, dotted
    target: str  # imported module (inside the package) or top-level name (outside it)
    path: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


@dataclass
class ImportGraph:
    """Modules of one package (dotted names) and the imports each one makes."""

    root: Path  # the folder that holds the package (``src``)
    package: str
    modules: dict[str, Path] = field(default_factory=dict)
    imports: dict[str, list[Import]] = field(default_factory=dict)

    @classmethod
    def scan(cls, root: Path, package: str) -> ImportGraph:
        graph = cls(root, package)
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            graph.modules[".".join(parts)] = path
        for name, path in graph.modules.items():
            graph.imports[name] = sorted(graph._read(name, path), key=lambda i: i.line)
        return graph

    # -- reading ------------------------------------------------------------

    def _read(self, module: str, path: Path) -> Iterable[Import]:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield from self._edges(module, alias.name, path, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = here[: len(here) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    # ``from pkg import mod`` imports the module pkg.mod when there is one.
                    candidate = f"{base}.{alias.name}"
                    name = candidate if candidate in self.modules else base
                    yield from self._edges(module, name, path, node.lineno)

    def _edges(self, module: str, name: str, path: Path, line: int) -> Iterable[Import]:
        if name != self.package and not name.startswith(self.package + "."):
            yield Import(module, name.split(".")[0], path, line)
            return
        parts = name.split(".")
        # Parents first: importing a.b.c runs a/__init__.py and a/b/__init__.py.
        for end in range(2, len(parts) + 1):
            target = ".".join(parts[:end])
            if target in self.modules and target != module:
                yield Import(module, target, path, line)

    # -- package cycles -----------------------------------------------------

    def unit(self, module: str) -> str | None:
        """The first-level subpackage or top module a module belongs to."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[0] == self.package else None

    def unit_edges(self) -> dict[str, dict[str, Import]]:
        """unit -> unit it imports -> the first import (by file, line) that makes the edge."""
        edges: dict[str, dict[str, Import]] = {}
        for module in sorted(self.imports):
            for imp in self.imports[module]:
                a, b = self.unit(imp.source), self.unit(imp.target)
                if a is None or b is None or a == b:
                    continue
                edges.setdefault(a, {}).setdefault(b, imp)
        return edges

    def cycles(self) -> list[str]:
        """One message per strongly connected group of units, naming a shortest cycle."""
        edges = self.unit_edges()
        messages = []
        for group in _strongly_connected({a: set(bs) for a, bs in edges.items()}):
            start = min(group)
            path = _shortest_cycle(start, edges, group)
            hops = [
                f"  {a} -> {b}: {edges[a][b].where(self.root)} imports {edges[a][b].target}"
                for a, b in zip(path, path[1:], strict=False)
            ]
            wider = len(group) > len(path) - 1
            messages.append(
                f"package import cycle {' -> '.join(path)}"
                + (f" (cycle group: {', '.join(sorted(group))})" if wider else "")
                + "\n"
                + "\n".join(hops)
            )
        return messages

    # -- effects in the pure core ------------------------------------------

    def effect_chains(
        self,
        core: Iterable[str],
        effects: Iterable[str],
        allowed: Iterable[str] = (),
    ) -> list[str]:
        """One message per import that brings an effect into the core, with its chain.

        ``core``: units of the pure core (``budget``, ``gguf``, ...). ``effects``:
        top-level names (``subprocess``) and package modules (``inferfleet.io``,
        which covers its submodules). ``allowed``: modules exempt from the rule;
        the walk neither starts nor continues through them.
        """
        core_units, effect_names, exempt = set(core), tuple(effects), set(allowed)

        def is_effect(target: str) -> bool:
            return any(target == e or target.startswith(e + ".") for e in effect_names)

        # Many core modules reach one offending import; report that import once,
        # with the shortest chain that reaches it from the core.
        reached: dict[Import, list[list[Import]]] = {}
        for module in sorted(self.modules):
            if self.unit(module) not in core_units or module in exempt:
                continue
            chain = self._path_to_effect(module, is_effect, exempt)
            if chain is not None:
                reached.setdefault(chain[-1], []).append(chain)
        messages = []
        for offender, chains in sorted(reached.items(), key=lambda kv: kv[0].where(self.root)):
            chain = min(chains, key=lambda c: (len(c), c[0].source))
            names = " -> ".join([chain[0].source, *(imp.target for imp in chain)])
            hops = [f"    {i.where(self.root)}: {i.source} imports {i.target}" for i in chain]
            others = sorted({c[0].source for c in chains} - {chain[0].source})
            messages.append(
                f"the pure core imports the effect {offender.target} "
                f"({offender.where(self.root)}): {names}\n"
                + "\n".join(hops)
                + (f"\n    also reached from: {', '.join(others)}" if others else "")
            )
        return messages

    def _path_to_effect(
        self, start: str, is_effect: Callable[[str], bool], exempt: set[str]
    ) -> list[Import] | None:
        came: dict[str, Import | None] = {start: None}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            for imp in self.imports.get(module, []):
                if is_effect(imp.target):
                    chain = [imp]
                    step = came[module]
                    while step is not None:
                        chain.append(step)
                        step = came[step.source]
                    return chain[::-1]
                if imp.target in self.modules and imp.target not in came:
                    if imp.target in exempt:
                        continue
                    came[imp.target] = imp
                    queue.append(imp.target)
        return None


def _runtime_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node except what sits under ``if TYPE_CHECKING:`` (never runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's groups of more than one node (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = 0
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return sorted(groups, key=min)


def _shortest_cycle(start: str, edges: dict[str, dict[str, Import]], group: set[str]) -> list[str]:
    """start -> ... -> start, fewest hops, staying inside the group."""
    came: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges.get(node, {})):
            if nxt not in group:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [*path[::-1], start]
            if nxt not in came:
                came[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in a cycle group but no cycle returns to it")
