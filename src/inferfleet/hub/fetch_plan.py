"""A fleet file's model as a fetch job: what to download, from where.

A model's declared files (L-09) are its manifest's lines, or its inline
``files:``. From them come the files to download (LFS ``sha256``, non-LFS
``gitsha1``, fragments) and the files to assemble from ``.partNofM``
fragments (L-05). The revision is the manifest's commit when it has one, so
a branch that moved since the manifest was written cannot mix two snapshots.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from inferfleet.artifacts.locate import model_dir, model_named
from inferfleet.artifacts.manifest import (
    COMMIT_RE,
    ManifestEntry,
    declared_files,
    fragment_sets,
    manifest_path,
    parse_manifest,
)
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.fleet import HubSource, Model
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.hub.auth import Token
from inferfleet.hub.download import Target
from inferfleet.hub.fetch import Assembly, FetchJob
from inferfleet.hub.manifest import resolve_commit

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class ModelPlan:
    name: str
    model: Model
    folder: Path
    entries: tuple[ManifestEntry, ...]
    repo: str | None  # None: not a Hub model
    revision: str | None
    commit: str | None  # from the manifest, if it records one
    manifest: Path | None


def endpoint(option: str | None) -> str:
    """``--endpoint``, else ``HF_ENDPOINT`` (mirrors), else the Hub."""
    value = (option or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", value):
        raise UsageError(
            f"endpoint {value!r} is not an http(s) URL",
            hint="e.g. --endpoint https://huggingface.co or HF_ENDPOINT=https://hf-mirror.example",
        )
    return value


def plan_model(loaded: LoadedFleet, name: str) -> ModelPlan:
    model = model_named(loaded, name)
    path = manifest_path(model, loaded.root)
    commit = None
    if path is not None:
        manifest = parse_manifest(path)
        entries = manifest.entries
        commit = manifest.commit
        _check_manifest_matches(model, manifest.repo, commit, path)
    else:
        entries = tuple(declared_files(model, loaded.root))
    source = model.source
    repo = source.hub if isinstance(source, HubSource) else None
    revision = source.revision if isinstance(source, HubSource) else None
    if commit is None and revision is not None and COMMIT_RE.match(revision):
        commit = revision
    return ModelPlan(name, model, model_dir(name, model), entries, repo, revision, commit, path)


def _check_manifest_matches(model: Model, repo: str | None, commit: str | None, path: Path) -> None:
    source = model.source
    if not isinstance(source, HubSource):
        return
    if repo is not None and repo != source.hub:
        raise SpecError(
            f"the manifest lists {repo}, the model's source is {source.hub}",
            path=path,
            hint="regenerate it: inferfleet models manifest "
            f"{source.hub} --revision {source.revision} --out {path.name}",
        )
    if commit is not None and COMMIT_RE.match(source.revision) and commit != source.revision:
        raise SpecError(
            f"the manifest was made at commit {commit}, the model pins {source.revision}",
            path=path,
            hint="regenerate the manifest at the pinned revision (inferfleet models manifest)",
        )


def split_entries(entries: tuple[ManifestEntry, ...]) -> tuple[list[Target], list[Assembly]]:
    """Files to download, and files to assemble from their fragments (L-05)."""
    by_path = {e.path: e for e in entries}
    assemblies: list[Assembly] = []
    for found in fragment_sets(entries):
        if found.mixed or found.missing:
            raise SpecError(
                f"{found.base} is declared as {found.count} fragments but part(s) "
                f"{', '.join(map(str, found.missing)) or '(mixed counts)'} are not declared",
                hint="regenerate the manifest (inferfleet models manifest) so the set is whole",
            )
        whole = by_path.get(found.base)
        if whole is not None and whole.size != found.size:
            raise SpecError(
                f"{found.base} is declared with {whole.size:,} bytes, its fragments add up to "
                f"{found.size:,}",
                hint="regenerate the manifest (inferfleet models manifest)",
            )
        sha = whole.sha256 if whole is not None else None
        assemblies.append(Assembly(found.base, found.size, sha, found.ordered()))
    assembled = {a.path for a in assemblies}
    orphans = [e.path for e in entries if e.kind == "parts" and e.path not in assembled]
    if orphans:
        raise SpecError(
            f"{orphans[0]} is declared as assembled from fragments, but none are declared",
            hint="regenerate the manifest (inferfleet models manifest)",
        )
    targets = [
        Target(e.path, e.size, sha256=e.sha256, gitsha1=e.gitsha1)
        for e in entries
        if e.path not in assembled
    ]
    return targets, assemblies


def fetch_job(plan: ModelPlan, *, endpoint_url: str, token: Token | None) -> FetchJob:
    """The job for ``inferfleet models fetch``; resolves a branch to one commit first."""
    if plan.repo is None or plan.revision is None:
        raise UsageError(
            f"model {plan.name!r} does not come from the Hub (its source is not `hub:`)",
            hint="fetch downloads hub models; package and path models are materialised by `up`",
        )
    commit = plan.commit
    if commit is None:
        commit = resolve_commit(
            endpoint=endpoint_url, repo=plan.repo, revision=plan.revision, token=token
        )
    targets, assemblies = split_entries(plan.entries)
    return FetchJob(
        endpoint=endpoint_url,
        repo=plan.repo,
        revision=commit,
        folder=plan.folder,
        targets=tuple(targets),
        assemblies=tuple(assemblies),
    )
