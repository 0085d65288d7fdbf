"""The top-level :func:`inspect`: one file, or every part of a split GGUF.

:func:`build_inspection` combines parsed headers (tensor type histogram,
attention layout) into an :class:`Inspection`.

Two different things share the word "part":

- a **split GGUF** (``model-00001-of-00006.gguf``, written by gguf-split) is
  several valid GGUF files; part 1 carries the metadata (and may hold no
  tensors at all, L-11), each part has ``split.no`` (0-based) and
  ``split.count``. They are never concatenated: the server is pointed at
  part 1 and finds the rest (L-04).
- a **fragment** (``model.gguf.part1of3``) is a byte range of one GGUF file,
  cut by a publisher to get under an upload limit. Fragments are not GGUF
  files on their own; they must be concatenated in numeric order (L-05).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from inferfleet.gguf import kv
from inferfleet.gguf.constants import REMOVED_GGML_TYPES, ggml_type, ggml_type_name
from inferfleet.gguf.errors import GGUFError, GGUFNotFound
from inferfleet.gguf.model import GGUFHeader, Inspection, PartInfo, TensorInfo, TypeStat
from inferfleet.gguf.reader import read_header
from inferfleet.gguf.source import http_client, is_url, open_source

if TYPE_CHECKING:
    import httpx

_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_FRAGMENT = re.compile(r"^(?P<base>.+)\.part(?P<no>\d+)of(?P<count>\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitName:
    """``<prefix>-NNNNN-of-MMMMM.gguf`` (llama.cpp's ``llama_split_path``)."""

    prefix: str
    number: int  # 1-based, as in the file name
    count: int

    def part(self, number: int) -> str:
        return f"{self.prefix}-{number:05d}-of-{self.count:05d}.gguf"


@dataclass(frozen=True)
class FragmentName:
    """``<base>.partNofM``: fragment N of M of the file ``base`` (L-05)."""

    base: str
    number: int
    count: int
    spelling: str  # "part" as written, to rebuild sibling names exactly

    def fragment(self, number: int) -> str:
        return f"{self.base}.{self.spelling}{number}of{self.count}"


def type_histogram(tensors: Sequence[TensorInfo]) -> tuple[TypeStat, ...]:
    """Count and bytes per tensor type, unknown ids included (L-10)."""
    counts: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for t in tensors:
        counts[t.type_id] = counts.get(t.type_id, 0) + 1
        sizes[t.type_id] = sizes.get(t.type_id, 0) + (t.n_bytes or 0)
    stats = []
    for type_id in sorted(counts, key=lambda i: (-counts[i], i)):
        known = ggml_type(type_id) is not None
        stats.append(
            TypeStat(
                type_id,
                ggml_type_name(type_id),
                counts[type_id],
                sizes[type_id] if known else None,
                known,
            )
        )
    return tuple(stats)


def _type_notes(histogram: Sequence[TypeStat]) -> list[str]:
    notes = []
    removed = [s for s in histogram if not s.known and s.type_id in REMOVED_GGML_TYPES]
    unknown = [s for s in histogram if not s.known and s.type_id not in REMOVED_GGML_TYPES]
    if unknown:
        ids = ", ".join(str(s.type_id) for s in unknown)
        notes.append(
            f"tensor type id(s) {ids} are not ggml types: only a runtime that knows them "
            "(the fork that wrote this file) can load it (L-10)"
        )
    if removed:
        names = ", ".join(s.name for s in removed)
        notes.append(f"tensor types {names} were removed from ggml; current llama.cpp refuses them")
    return notes


def build_inspection(
    location: str,
    headers: Sequence[GGUFHeader],
    *,
    split_count: int | None = None,
    split_numbers: Sequence[int | None] = (),
    problems: Sequence[str] = (),
) -> Inspection:
    """Combine one or more parsed headers into an :class:`Inspection`.

    ``headers[0]`` carries the model metadata (part 1 of a split); tensors of
    all parts are combined.
    """
    first = headers[0]
    tensors = tuple(t for h in headers for t in h.tensors)
    numbers = list(split_numbers) or [None] * len(headers)
    parts = tuple(
        PartInfo(
            h.location,
            no,
            len(h.tensors),
            sum(t.n_bytes or 0 for t in h.tensors),
            h.data_offset,
            h.file_size,
        )
        for h, no in zip(headers, numbers, strict=True)
    )
    histogram = type_histogram(tensors)
    layout = kv.attention_layout(first.metadata)
    notes = _type_notes(histogram)
    if layout is not None:
        notes.extend(layout.notes)
    all_problems = [*problems, *(p for h in headers for p in h.problems)]
    return Inspection(
        location=location,
        version=first.version,
        metadata=first.metadata,
        value_types=first.value_types,
        tensors=tensors,
        parts=parts,
        split_count=split_count,
        layout=layout,
        problems=tuple(all_problems),
        notes=tuple(notes),
        type_histogram=histogram,
    )


def _numbered(pattern: re.Pattern[str], name: str) -> tuple[re.Match[str], int, int] | None:
    """A match of a ``N of COUNT`` name pattern whose N lies in 1..COUNT, with N and COUNT."""
    match = pattern.match(name)
    if match is None:
        return None
    number, count = int(match.group("no")), int(match.group("count"))
    return (match, number, count) if 1 <= number <= count else None


def parse_split_name(name: str) -> SplitName | None:
    found = _numbered(_SPLIT, name)
    if found is None:
        return None
    match, number, count = found
    return SplitName(match.group("prefix"), number, count)


def parse_fragment_name(name: str) -> FragmentName | None:
    found = _numbered(_FRAGMENT, name)
    if found is None:
        return None
    match, number, count = found
    spelling = name[len(match.group("base")) + 1 :][:4]
    return FragmentName(match.group("base"), number, count, spelling)


def basename(location: str) -> str:
    """The file name of a path or URL (query string ignored)."""
    if is_url(location):
        return PurePosixPath(urlsplit(location).path).name
    return Path(location).name


def sibling(location: str, name: str) -> str:
    """The path or URL of the file ``name`` next to ``location``."""
    if is_url(location):
        parts = urlsplit(location)
        path = str(PurePosixPath(parts.path).with_name(name))
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))
    return str(Path(location).with_name(name))


def local_fragments(path: Path | str) -> tuple[list[Path], list[int]]:
    """The fragments of ``path``'s set present next to it, and missing numbers."""
    frag = parse_fragment_name(Path(path).name)
    if frag is None:
        return [], []
    present: list[Path] = []
    missing: list[int] = []
    for number in range(1, frag.count + 1):
        candidate = Path(path).with_name(frag.fragment(number))
        if candidate.is_file():
            present.append(candidate)
        else:
            missing.append(number)
    return present, missing


def _fragment_error(location: str, frag: FragmentName) -> GGUFError:
    detail = ""
    if not is_url(location):
        _, missing = local_fragments(location)
        detail = (
            f"; missing here: {', '.join(frag.fragment(n) for n in missing)}"
            if missing
            else "; all fragments are present"
        )
    return GGUFError(
        f"fragment {frag.number} of {frag.count} of {frag.base!r}, not a GGUF file on its own"
        + detail,
        source=location,
        hint=f"verify each fragment, concatenate {frag.fragment(1)} .. {frag.fragment(frag.count)} "
        f"in numeric order into {frag.base} and inspect that (L-05)",
    )


def _read(
    location: str, load_arrays: bool | Collection[str], client: httpx.Client | None
) -> GGUFHeader:
    source = open_source(location, client=client)
    try:
        return read_header(source, load_arrays=load_arrays)
    finally:
        source.close()


def _split_meta(header: GGUFHeader, key: str) -> int | None:
    value = header.metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def inspect(
    location: str | Path,
    *,
    load_arrays: bool | Collection[str] = False,
    client: httpx.Client | None = None,
) -> Inspection:
    """Inspect a GGUF file or URL; for a split GGUF, all its parts together.

    Pointing at any part of a split finds the others next to it; missing
    parts are reported in ``problems``. A ``.partNofM`` fragment is refused
    with the concatenation it needs.
    """
    text = str(location)
    name = basename(text)
    frag = parse_fragment_name(name)
    if frag is not None:
        raise _fragment_error(text, frag)
    own_client = client is None and is_url(text)
    shared = http_client() if own_client else client
    try:
        return _inspect(text, name, load_arrays, shared)
    finally:
        if own_client and shared is not None:
            shared.close()


def _inspect(
    text: str, name: str, load_arrays: bool | Collection[str], client: httpx.Client | None
) -> Inspection:
    header = _read(text, load_arrays, client)
    count = _split_meta(header, "split.count")
    if count is None or count <= 1:
        return build_inspection(text, [header])
    split = parse_split_name(name)
    notes_problems: list[str] = []
    if split is None or split.count != count:
        notes_problems.append(
            f"the header says split.count={count} but the file name does not follow "
            f"<name>-NNNNN-of-{count:05d}.gguf: the other parts cannot be found"
        )
        return build_inspection(text, [header], split_count=count, problems=notes_problems)
    headers: list[GGUFHeader] = []
    numbers: list[int | None] = []
    for number in range(1, count + 1):
        where = text if number == split.number else sibling(text, split.part(number))
        try:
            part = header if number == split.number else _read(where, load_arrays, client)
        except GGUFNotFound:
            notes_problems.append(f"part {number} of {count} is missing: {split.part(number)}")
            continue
        no, part_count = _split_meta(part, "split.no"), _split_meta(part, "split.count")
        if no != number - 1 or part_count != count:
            notes_problems.append(
                f"{split.part(number)} says split.no={no}, split.count={part_count}; "
                f"expected {number - 1} and {count}"
            )
        headers.append(part)
        numbers.append(number)
    if numbers[0] != 1:
        notes_problems.append("part 1 (the one with the model's metadata) is missing")
    declared = _split_meta(headers[0], "split.tensors.count")
    total = sum(len(h.tensors) for h in headers)
    if declared is not None and len(headers) == count and declared != total:
        notes_problems.append(f"split.tensors.count is {declared} but the parts hold {total}")
    result = build_inspection(
        text, headers, split_count=count, split_numbers=numbers, problems=notes_problems
    )
    # L-04: the parts are the payload; the server is pointed at part 1.
    note = (
        f"split GGUF in {count} parts: point the server at {split.part(1)}; "
        "never concatenate the parts (L-04)"
    )
    return replace(result, notes=(*result.notes, note))
