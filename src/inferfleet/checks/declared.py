"""Declared model files against what their source states (L-01, L-08, L-09).

The fleet file's ``models.X.files`` (or the model's manifest) is the file
set a host fetches and verifies. A size or sha256 that disagrees with the
source fails on the host, after a download; here it fails in CI. The source
is the Hub listing at the pinned revision (LFS files state size and sha256,
others their size), the installed package (its file and the sha256 it
ships), or, for a path model, the file on this machine by ``stat``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.bounded import tree_path_problem
from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.errors import SpecError
from inferfleet.fleetfile.fleet import HubSource, Model


@rule("declared-files-match-source", "L-01", "error")
def declared_files_match_source(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """a declared model file's size or sha256 differs from what its source states"""
    for name, model in ctx.fleet.models.items():
        try:
            declared = declared_files(model, ctx.root)
        except SpecError as exc:
            yield Skip(f"model {name}", f"model {name!r}: {exc.message}")
            continue
        listing = ctx.source_files(name)
        if isinstance(listing, str):
            yield Skip(f"model {name}", listing)
            continue
        fix = _fix(name, model, declared)
        for index, entry in enumerate(declared):
            field = _field(name, model, index)
            stated = listing.files.get(entry.path)
            if stated is None:
                yield Hit(
                    None,
                    field,
                    f"model {name!r}: {entry.path} is declared but {listing.source} "
                    "has no such file",
                    f"fix the path, or pin the revision that has it; {fix}",
                )
                continue
            yield from _compare(name, entry, stated, listing.source, field, fix)


def _compare(
    name: str, entry: ManifestEntry, stated: ManifestEntry, source: str, field: str, fix: str
) -> Iterator[Hit]:
    if stated.kind != "parts" and stated.size != entry.size:
        yield Hit(
            None,
            field,
            f"model {name!r}: {entry.path} is declared as {entry.size:,} bytes; "
            f"{source} states {stated.size:,} bytes",
            fix,
        )
        return
    if entry.sha256 is not None and stated.sha256 is not None and entry.sha256 != stated.sha256:
        yield Hit(
            None,
            field,
            f"model {name!r}: {entry.path} is declared with sha256 {entry.sha256}; "
            f"{source} states {stated.sha256}",
            fix,
        )


def _field(name: str, model: Model, index: int) -> str:
    if model.manifest is not None:
        return f"models.{name}.manifest"
    return f"models.{name}.files[{index}].size"


def _fix(name: str, model: Model, declared: list[ManifestEntry]) -> str:
    source = model.source
    if isinstance(source, HubSource):
        includes = " ".join(f"--include {shlex.quote(e.path)}" for e in declared[:4])
        out = model.manifest or f"models/{name}.manifest"
        command = (
            f"inferfleet models manifest {source.hub} --revision {shlex.quote(source.revision)} "
            f"{includes} --out {shlex.quote(out)}"
        )
        if model.manifest is None:
            return f"write the source's sizes and hashes: {command}, then use `manifest: {out}`"
        return f"write the source's sizes and hashes again: {command}"
    return "declare the size and sha256 the source has (stat / sha256sum the file)"


@rule("manifest-outside-repository", "L-09", "error")
def manifest_outside_repository(ctx: CheckContext) -> Iterator[Hit]:
    """a model manifest is not a regular file of the fleet repository"""
    # The same rule the renderers read it by: its text is copied into what is
    # rendered (a Kubernetes ConfigMap), so a symlink leading out, a FIFO or a
    # device must fail here, not be skipped by every rule that needs the manifest.
    for name, model in ctx.fleet.models.items():
        if model.manifest is None:
            continue
        problem = tree_path_problem(ctx.root, model.manifest, must_exist=False)
        if problem is not None:
            yield Hit(
                None,
                f"models.{name}.manifest",
                f"model manifest of {name!r}: {problem}",
                "commit the manifest in the fleet repository, relative to the fleet file "
                "(`inferfleet models manifest` writes one)",
            )
