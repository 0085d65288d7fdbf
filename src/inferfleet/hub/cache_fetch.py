"""``models fetch`` into the Hugging Face cache: huggingface_hub's own download, then our gate.

For a model with ``hf_cache:`` (and for ``models fetch --into-hf-cache``), the
declared files (L-09) go where ``hf download``, transformers and llama.cpp's
``-hf`` look for them: huggingface_hub's ``hf_hub_download`` writes its cache
layout itself (blobs, refs, snapshot links; Xet and redirects included, L-02,
L-03). Nothing is downloaded that the verify gate already vouches for (a
second run makes no request), a file whose bytes are wrong in the cache is
downloaded again with ``force_download``, and every file is verified by size
and sha256 in place afterwards (L-01, L-08) before the fetch reports success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.artifacts.hfcache import repo_folder
from inferfleet.artifacts.manifest import ManifestEntry
from inferfleet.artifacts.verify import Checked, raise_for_problems, refuse_assembled, verify_files
from inferfleet.hub.auth import Token
from inferfleet.hub.errors import HubError
from inferfleet.hub.manifest import call_hub
from inferfleet.io.offline import offline


@dataclass
class CacheFetch:
    """What a fetch into the cache did: files downloaded, files already verified there."""

    snapshot: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    results: list[Checked] = field(default_factory=list)

    @property
    def downloaded_bytes(self) -> int:
        return sum(c.size for c in self.results if c.path in self.downloaded)

    @property
    def reused_bytes(self) -> int:
        return sum(c.size for c in self.results if c.path in self.reused)


def fetch_into_cache(
    *,
    name: str,
    repo: str,
    commit: str,
    entries: Sequence[ManifestEntry],
    cache: Path,
    record_at: Path,
    endpoint: str,
    token: Token | None,
    on_note: Callable[[str], None],
) -> CacheFetch:
    """Make ``cache`` hold ``repo@commit``'s declared files, verified; HubError/FilesRejected."""
    where = f"{repo}@{commit}"
    refuse_assembled(name, entries, where=where)
    snapshot = cache / repo_folder(repo) / "snapshots" / commit
    before = {c.path: c for c in verify_files(snapshot, entries, record_at=record_at)}
    done = CacheFetch(snapshot)
    for entry in entries:
        checked = before[entry.path]
        if checked.ok:
            done.reused.append(entry.path)
            continue
        if checked.status != "missing":
            on_note(f"{entry.path}: {checked.detail}; downloading it again into the cache")
        _download(
            repo, commit, entry.path, cache, endpoint, token, force=checked.status != "missing"
        )
        done.downloaded.append(entry.path)
    done.results = verify_files(snapshot, entries, record_at=record_at)
    raise_for_problems(
        snapshot,
        done.results,
        where=where,
        name=name,
        hint="the endpoint sent other bytes than declared; check the manifest and the endpoint",
    )
    return done


def _download(
    repo: str,
    commit: str,
    path: str,
    cache: Path,
    endpoint: str,
    token: Token | None,
    *,
    force: bool,
) -> None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    if offline():
        raise HubError(
            f"{repo}/{path} is not in the Hugging Face cache {cache} and HF_HUB_OFFLINE is set",
            hint="unset HF_HUB_OFFLINE to download it, or copy the cache from a host that has it",
            where=f"{repo}@{commit}",
        )
    try:
        call_hub(
            lambda: hf_hub_download(
                repo,
                path,
                revision=commit,
                cache_dir=cache,
                endpoint=endpoint,
                token=token.value if token else False,
                force_download=force,
            ),
            endpoint,
            repo,
            token,
        )
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:
        raise HubError(
            f"{repo}/{path}: could not download into the Hugging Face cache: {exc}",
            hint="check HF_ENDPOINT / --endpoint and the network, then run the command again",
            where=endpoint,
        ) from None
