"""Model manifests and declared file sets: one format, one parser.

A manifest is the declared file set of a model (L-09): fetch downloads
exactly its lines, verify checks exactly its lines, whatever the remote tree
lists today. Lines are ``SIZE KIND:VALUE PATH``, sorted by path, so a new
upstream revision reads as a small diff::

    # inferfleet manifest v1
    # repo: unsloth/gemma-3-270m-it-GGUF
    # revision: main
    # commit: 3f5c...
    253113024 sha256:a5fd...6818 gemma-3-270m-q4_k_m.gguf
    1570 gitsha1:5d8e...9a1c README.md
    90000000 parts:3 big.gguf

Kinds: ``sha256`` (LFS files: the content hash from the Hub's LFS pointer),
``gitsha1`` (small non-LFS files: the git blob id), and ``parts:M`` (a file
assembled from ``.partNofM`` fragments, L-05; size only unless someone
replaces the line with the publisher's ``sha256``). A fleet file's inline
``files:`` become entries of the same type (``sha256``, or ``size`` when the
entry has no hash), so every reader sees one shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.bounded import read_bounded_text, tree_path_problem
from inferfleet.errors import FleetError, SpecError
from inferfleet.fleetfile.fleet import Model

# A line per file: a model of thousands of shards stays far below this.
MAX_MANIFEST_BYTES = 16 << 20


def _manifest_error(message: str, *, where: str, hint: str = "") -> FleetError:
    return SpecError(message, path=where, hint=hint)


HEADER = "# inferfleet manifest v1"
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_FRAGMENT = re.compile(r"^(?P<base>.+)\.part(?P<no>\d+)of(?P<count>\d+)$", re.IGNORECASE)
_VALUE = {
    "sha256": re.compile(r"^[0-9a-f]{64}$"),
    "gitsha1": re.compile(r"^[0-9a-f]{40}$"),
    "parts": re.compile(r"^[1-9][0-9]*$"),
}
KINDS = tuple(_VALUE)
_EXAMPLE = "e.g. `253113024 sha256:a5fd...6818 model.gguf`"


@dataclass(frozen=True)
class ManifestEntry:
    """One declared file: ``kind`` is sha256 | gitsha1 | parts, or size (inline, no hash)."""

    path: str
    size: int
    kind: str
    value: str  # hex digest, the fragment count for parts, "" for size

    @property
    def sha256(self) -> str | None:
        return self.value if self.kind == "sha256" else None

    @property
    def gitsha1(self) -> str | None:
        return self.value if self.kind == "gitsha1" else None

    def line(self) -> str:
        return f"{self.size} {self.kind}:{self.value} {self.path}"

    @classmethod
    def stated(cls, path: str, size: int, sha256: str | None) -> ManifestEntry:
        """A file whose size, and sha256 where there is one, a declaration states."""
        return cls(path, size, "size", "") if sha256 is None else cls(path, size, "sha256", sha256)


@dataclass(frozen=True)
class Manifest:
    repo: str | None
    revision: str | None
    commit: str | None
    entries: tuple[ManifestEntry, ...]

    def render(self) -> str:
        lines = [HEADER]
        if self.repo:
            lines.append(f"# repo: {self.repo}")
        if self.revision:
            lines.append(f"# revision: {self.revision}")
        if self.commit:
            lines.append(f"# commit: {self.commit}")
        lines += [e.line() for e in sorted(self.entries, key=lambda e: e.path)]
        return "\n".join(lines) + "\n"


def manifest_path(model: Model, fleet_root: Path) -> Path | None:
    """The model's manifest file, relative to the fleet file's folder; None when inline."""
    if model.manifest is None:
        return None
    # Its text is copied into what is rendered (a Kubernetes ConfigMap): it must be a
    # file of the fleet repository, never a symlink to one elsewhere.
    problem = tree_path_problem(fleet_root, model.manifest, must_exist=False)
    if problem is not None:
        raise SpecError(
            f"model manifest {problem}",
            path=fleet_root / model.manifest,
            hint="commit the manifest in the fleet repository, relative to the fleet file",
        )
    return fleet_root / model.manifest


def declared_files(model: Model, fleet_root: Path) -> list[ManifestEntry]:
    """The declared file set (L-09): inline ``files:``, or the model's manifest."""
    path = manifest_path(model, fleet_root)
    if path is not None:
        return list(parse_manifest(path).entries)
    return [ManifestEntry.stated(f.path, f.size, f.sha256) for f in model.files]


def parse_manifest(path: Path) -> Manifest:
    """Read a manifest; every malformed line is a SpecError at ``path:line``."""
    hint = (
        "write it with `inferfleet models manifest` or fix the model's manifest path "
        "(it is relative to the fleet file)"
    )
    text = read_bounded_text(
        path, MAX_MANIFEST_BYTES, what="model manifest", error=_manifest_error, hint=hint
    )
    header: dict[str, str] = {}
    entries: list[ManifestEntry] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            _header_line(stripped, header, path, number)
            continue
        entry = _entry_line(stripped, path, number)
        if entry.path in seen:
            raise SpecError(
                f"{entry.path} is listed twice (first on line {seen[entry.path]})",
                path=path,
                line=number,
                hint="keep one line per file",
            )
        seen[entry.path] = number
        entries.append(entry)
    if not entries:
        raise SpecError(
            "manifest lists no files",
            path=path,
            hint="regenerate it with `inferfleet models manifest REPO --out FILE`",
        )
    return Manifest(
        header.get("repo"), header.get("revision"), header.get("commit"), tuple(entries)
    )


def _header_line(text: str, header: dict[str, str], path: Path, number: int) -> None:
    key, _, value = text[1:].partition(":")
    key, value = key.strip(), value.strip()
    if key not in {"repo", "revision", "commit"}:
        return  # a comment
    if key == "commit" and not COMMIT_RE.match(value):
        raise SpecError(
            f"manifest commit {value!r} is not a 40-hex git sha",
            path=path,
            line=number,
            hint="regenerate the manifest (inferfleet models manifest) or remove the line",
        )
    header[key] = value


def _entry_line(text: str, path: Path, number: int) -> ManifestEntry:
    parts = text.split(maxsplit=2)
    if len(parts) != 3 or not parts[0].isdigit() or ":" not in parts[1]:
        raise SpecError(
            "manifest line must be `SIZE KIND:VALUE PATH`", path=path, line=number, hint=_EXAMPLE
        )
    size, digest, rel = parts
    kind, _, value = digest.partition(":")
    if kind not in _VALUE:
        raise SpecError(
            f"unknown hash kind {kind!r} in manifest",
            path=path,
            line=number,
            hint=f"kinds are {', '.join(KINDS)}",
        )
    if not _VALUE[kind].match(value):
        raise SpecError(
            f"bad {kind} value {value!r} in manifest",
            path=path,
            line=number,
            hint="sha256: 64 lower-case hex, gitsha1: 40 lower-case hex, parts: the fragment count",
        )
    if rel.startswith("/") or ".." in rel.split("/"):
        raise SpecError(
            f"manifest path {rel!r} leaves the model's folder",
            path=path,
            line=number,
            hint="paths are relative to the model's folder, without `..`",
        )
    return ManifestEntry(rel, int(size), kind, value)


# ---------------------------------------------------------------- fragments (L-05)


@dataclass(frozen=True)
class Fragment:
    """``<base>.partNofM``: a piece of a file that is concatenated after download (L-05)."""

    base: str
    number: int
    count: int


def fragment_of(path: str) -> Fragment | None:
    match = _FRAGMENT.match(path)
    if match is None:
        return None
    number, count = int(match["no"]), int(match["count"])
    if not 1 <= number <= count:
        return None
    return Fragment(match["base"], number, count)


@dataclass
class FragmentSet:
    """The fragments of one base file found in a list of entries."""

    base: str
    count: int  # as the first fragment says
    parts: dict[int, ManifestEntry] = field(default_factory=dict)
    mixed: bool = False  # fragments disagree on the count

    @property
    def missing(self) -> list[int]:
        return [n for n in range(1, self.count + 1) if n not in self.parts]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.parts.values())

    def ordered(self) -> tuple[str, ...]:
        """Fragment paths in numeric order (part10 after part9, not after part1)."""
        return tuple(self.parts[n].path for n in sorted(self.parts))


def fragment_sets(entries: Iterable[ManifestEntry]) -> list[FragmentSet]:
    """Group ``.partNofM`` entries by the file they are cut from, sorted by base."""
    sets: dict[str, FragmentSet] = {}
    for entry in entries:
        fragment = fragment_of(entry.path)
        if fragment is None:
            continue
        found = sets.setdefault(fragment.base, FragmentSet(fragment.base, fragment.count))
        if fragment.count != found.count:
            found.mixed = True
        found.parts[fragment.number] = entry
    return [sets[base] for base in sorted(sets)]
