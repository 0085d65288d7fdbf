"""Model manifests: what a repo holds at one commit, one file per line.

A manifest is the declared file set of a model (L-09): fetch downloads
exactly its lines, verify checks exactly its lines, whatever the remote tree
lists today. Lines are ``SIZE KIND:HASH PATH``, sorted by path, so a new
upstream revision reads as a small diff::

    # inferfleet manifest v1
    # repo: unsloth/gemma-3-270m-it-GGUF
    # revision: main
    # commit: 3f5c...
    253113024 sha256:a5fd...6818 gemma-3-270m-q4_k_m.gguf
    1570 gitsha1:5d8e...9a1c README.md
    90000000 parts:3 big.gguf

Kinds: ``sha256`` (LFS files: the content hash from the Hub's LFS pointer),
``gitsha1`` (small non-LFS files: the git blob id; size plus blob hash), and
``parts:M`` (a file assembled from ``.partNofM`` fragments, L-05; size only
unless someone replaces the line with the publisher's ``sha256``). This is
exactly what :func:`inferfleet.models.artifacts.read_manifest` reads.

Listing uses huggingface_hub's ``HfApi`` pointed at the configured endpoint;
sizes of non-LFS files are read from the file's own answer, never from a
307 redirect page (L-02).
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from inferfleet.errors import SpecError
from inferfleet.hub import wire
from inferfleet.hub.auth import Token
from inferfleet.hub.errors import HubError
from inferfleet.io import http
from inferfleet.models.artifacts import read_manifest

HEADER = "# inferfleet manifest v1"
_FRAGMENT = re.compile(r"^(?P<base>.+)\.part(?P<no>\d+)of(?P<count>\d+)$", re.IGNORECASE)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_VALUE = {
    "sha256": re.compile(r"^[0-9a-f]{64}$"),
    "gitsha1": re.compile(r"^[0-9a-f]{40}$"),
    "parts": re.compile(r"^[1-9][0-9]*$"),
}
_KINDS = tuple(_VALUE)


@dataclass(frozen=True)
class ManifestEntry:
    path: str
    size: int
    kind: str  # sha256 | gitsha1 | parts
    value: str  # hex digest, or the fragment count for parts

    @property
    def sha256(self) -> str | None:
        return self.value if self.kind == "sha256" else None

    @property
    def gitsha1(self) -> str | None:
        return self.value if self.kind == "gitsha1" else None

    def line(self) -> str:
        return f"{self.size} {self.kind}:{self.value} {self.path}"


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


@dataclass(frozen=True)
class Fragment:
    """``<base>.partNofM`` (L-05)."""

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


def selected(path: str, includes: Sequence[str]) -> bool:
    """Whether ``--include`` globs select ``path``; a fragment counts as its base (L-05)."""
    if not includes:
        return True
    names = [path]
    fragment = fragment_of(path)
    if fragment is not None:
        names.append(fragment.base)
    return any(fnmatch.fnmatchcase(name, glob) for name in names for glob in includes)


def with_assembled(entries: list[ManifestEntry], *, repo: str) -> list[ManifestEntry]:
    """Add one ``parts:M`` line per complete fragment set; refuse incomplete sets."""
    groups: dict[str, dict[int, ManifestEntry]] = {}
    counts: dict[str, int] = {}
    for entry in entries:
        fragment = fragment_of(entry.path)
        if fragment is None:
            continue
        if counts.setdefault(fragment.base, fragment.count) != fragment.count:
            raise HubError(
                f"{repo}: fragments of {fragment.base} disagree on their count",
                hint="the repo mixes two fragment sets; select one with --include",
            )
        groups.setdefault(fragment.base, {})[fragment.number] = entry
    paths = {e.path for e in entries}
    result = list(entries)
    for base, parts in sorted(groups.items()):
        missing = [n for n in range(1, counts[base] + 1) if n not in parts]
        if missing:
            raise HubError(
                f"{repo}: {base} is cut into {counts[base]} fragments but part(s) "
                f"{', '.join(map(str, missing))} are not in the repo",
                hint="the upload is incomplete upstream: pick another revision or file",
            )
        if base in paths:
            raise HubError(
                f"{repo}: {base} exists both whole and as .partNofM fragments",
                hint="select one of them with --include",
            )
        total = sum(e.size for e in parts.values())
        result.append(ManifestEntry(base, total, "parts", str(counts[base])))
    return result


def parse_manifest(path: Path) -> Manifest:
    """Read a manifest with its kinds and header (validated by artifacts.read_manifest)."""
    read_manifest(path)  # the same rules and errors as every other reader
    repo = revision = commit = None
    entries: list[ManifestEntry] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if text.startswith("#"):
            key, _, value = text[1:].partition(":")
            key, value = key.strip(), value.strip()
            if key == "repo":
                repo = value
            elif key == "revision":
                revision = value
            elif key == "commit":
                if not _COMMIT.match(value):
                    raise SpecError(
                        "manifest commit must be a 40-hex git sha", path=path, line=number
                    )
                commit = value
            continue
        if not text:
            continue
        size, digest, rel = text.split(maxsplit=2)
        kind, _, value = digest.partition(":")
        if kind not in _KINDS:
            raise SpecError(
                f"unknown hash kind {kind!r} in manifest",
                path=path,
                line=number,
                hint=f"kinds are {', '.join(_KINDS)}",
            )
        if not _VALUE[kind].match(value):
            raise SpecError(
                f"bad {kind} value {value!r} in manifest",
                path=path,
                line=number,
                hint="sha256: 64 hex, gitsha1: 40 hex, parts: the fragment count",
            )
        entries.append(ManifestEntry(rel, int(size), kind, value))
    return Manifest(repo, revision, commit, tuple(entries))


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write atomically: a reader sees the old manifest or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(manifest.render(), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def build_manifest(
    *,
    endpoint: str,
    repo: str,
    revision: str,
    includes: Sequence[str],
    token: Token | None,
    on_note: Callable[[str], None] = lambda _text: None,
) -> Manifest:
    """Resolve ``revision`` to a commit and list the repo's files there."""
    api = _api(endpoint, token)
    commit = resolve_commit(endpoint=endpoint, repo=repo, revision=revision, token=token)
    tree = _call(
        lambda: list(api.list_repo_tree(repo, revision=commit, recursive=True)),
        endpoint,
        repo,
        token,
    )
    entries: list[ManifestEntry] = []
    with http.client(timeout=30.0) as client:
        for item in tree:
            if not hasattr(item, "blob_id") or not selected(item.path, includes):
                continue  # folders, and files the globs leave out
            entries.append(_entry(client, item, endpoint, repo, commit, token, on_note))
    if not entries:
        raise HubError(
            f"{repo}@{revision}: no file matches --include {' '.join(includes)}",
            hint="check the globs (quote them in the shell: --include '*Q4_K_M*.gguf')",
        )
    return Manifest(repo, revision, commit, tuple(with_assembled(entries, repo=repo)))


def resolve_commit(*, endpoint: str, repo: str, revision: str, token: Token | None) -> str:
    """The commit sha a branch or tag points at now (a sha resolves to itself)."""
    api = _api(endpoint, token)
    info = _call(lambda: api.model_info(repo, revision=revision), endpoint, repo, token)
    commit = getattr(info, "sha", None)
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        raise HubError(
            f"{repo}@{revision}: the endpoint did not return a commit sha",
            hint="use an endpoint that speaks the Hub's API (HF_ENDPOINT / --endpoint)",
            where=endpoint,
        )
    return commit


def _entry(
    client: httpx.Client,
    item: Any,
    endpoint: str,
    repo: str,
    commit: str,
    token: Token | None,
    on_note: Callable[[str], None],
) -> ManifestEntry:
    if item.lfs is not None:
        return ManifestEntry(item.path, int(item.lfs.size), "sha256", str(item.lfs.sha256).lower())
    # Not LFS: the tree's blob id is the git hash; the size comes from the file's
    # own answer after the 307, not from the redirect page (L-02).
    on_note(f"reading the size of {item.path}")
    remote = _with_retries(
        lambda: wire.probe(
            client, endpoint=endpoint, repo=repo, revision=commit, path=item.path, token=token
        )
    )
    if remote.size != int(item.size):
        raise HubError(
            f"{repo}/{item.path}: the tree says {item.size} bytes, the file answers {remote.size}",
            hint="the endpoint is inconsistent; try again later or another mirror",
            where=endpoint,
        )
    return ManifestEntry(item.path, remote.size, "gitsha1", str(item.blob_id).lower())


def _api(endpoint: str, token: Token | None) -> Any:
    from huggingface_hub import HfApi

    # token=False: never fall back to a token huggingface_hub finds by itself;
    # inferfleet decides which token goes where (auth.py).
    return HfApi(endpoint=endpoint.rstrip("/"), token=token.value if token else False)


def _call(fn: Callable[[], Any], endpoint: str, repo: str, token: Token | None) -> Any:
    """Run one HfApi call; map its errors to ours with the same wording as downloads."""
    from huggingface_hub.errors import HfHubHTTPError

    def attempt() -> Any:
        try:
            return fn()
        except HfHubHTTPError as exc:
            response = exc.response
            raise wire.hub_error(
                response.status_code,
                response.headers,
                response.text[:300].strip().replace("\n", " "),
                where=str(response.url),
                repo=repo,
                path="",
                token=token,
                endpoint=endpoint,
            ) from None
        except Exception as exc:
            if not _is_transport_error(exc):
                raise
            raise wire.Transient(f"{type(exc).__name__}: {exc}") from None

    try:
        return _with_retries(attempt)
    except wire.Transient as exc:
        raise HubError(
            f"{repo}: the endpoint kept failing: {exc}",
            hint="check HF_ENDPOINT / --endpoint and the network, then run the command again",
            where=endpoint,
        ) from None


def _is_transport_error(exc: BaseException) -> bool:
    """A connection-level failure of whichever HTTP library huggingface_hub uses.

    huggingface_hub moved from requests to httpx to httpx2; matching the
    exception family by name keeps this independent of which one is installed.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"TransportError", "ConnectionError", "Timeout", "TimeoutException"})


def _with_retries(fn: Callable[[], Any], *, attempts: int = 4, base: float = 0.5) -> Any:
    for number in range(attempts):
        try:
            return fn()
        except wire.Transient as exc:
            if number == attempts - 1:
                raise
            time.sleep(exc.retry_after if exc.retry_after is not None else base * 2**number)
    raise AssertionError("unreachable")
