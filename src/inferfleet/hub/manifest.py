"""Manifests from a Hub listing: what a repo holds at one commit, one file per line.

The format and its parser are :mod:`inferfleet.artifacts.manifest`; this
module lists a repo with huggingface_hub's ``HfApi`` pointed at the
configured endpoint, turns the listing into a :class:`Manifest`, and writes
it. Sizes of non-LFS files are read from the file's own answer, never from
a 307 redirect page (L-02).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from inferfleet.artifacts.manifest import (
    COMMIT_RE,
    Manifest,
    ManifestEntry,
    fragment_of,
    fragment_sets,
)
from inferfleet.errors import OfflineError
from inferfleet.hub import wire
from inferfleet.hub.auth import Token, auth_headers
from inferfleet.hub.errors import HubError
from inferfleet.hub.reach import unreachable
from inferfleet.io import http
from inferfleet.io.files import atomic_write
from inferfleet.io.offline import offline
from inferfleet.io.retry import GaveUp, Retry, retrying

T = TypeVar("T")


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
    paths = {e.path for e in entries}
    result = list(entries)
    for found in fragment_sets(entries):
        if found.mixed:
            raise HubError(
                f"{repo}: fragments of {found.base} disagree on their count",
                hint="the repo mixes two fragment sets; select one with --include",
            )
        if found.missing:
            raise HubError(
                f"{repo}: {found.base} is cut into {found.count} fragments but part(s) "
                f"{', '.join(map(str, found.missing))} are not in the repo",
                hint="the upload is incomplete upstream: pick another revision or file",
            )
        if found.base in paths:
            raise HubError(
                f"{repo}: {found.base} exists both whole and as .partNofM fragments",
                hint="select one of them with --include",
            )
        result.append(ManifestEntry(found.base, found.size, "parts", str(found.count)))
    return result


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write atomically: a reader sees the old manifest or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, manifest.render())


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
    api = hub_api(endpoint, token)
    commit = resolve_commit(endpoint=endpoint, repo=repo, revision=revision, token=token)
    tree = call_hub(
        lambda: list(api.list_repo_tree(repo, revision=commit, recursive=True)),
        endpoint,
        repo,
        token,
    )
    entries: list[ManifestEntry] = []
    with http.client(purpose="remote", timeout=30.0) as client:
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
    api = hub_api(endpoint, token)
    info = call_hub(lambda: api.model_info(repo, revision=revision), endpoint, repo, token)
    commit = getattr(info, "sha", None)
    if not isinstance(commit, str) or not COMMIT_RE.match(commit):
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
        lambda: wire.probe(client, wire.HubFile(endpoint, repo, commit, item.path, token))
    )
    if remote.size != int(item.size):
        raise HubError(
            f"{repo}/{item.path}: the tree says {item.size} bytes, the file answers {remote.size}",
            hint="the endpoint is inconsistent; try again later or another mirror",
            where=endpoint,
        )
    return ManifestEntry(item.path, remote.size, "gitsha1", str(item.blob_id).lower())


def hub_api(endpoint: str, token: Token | None) -> Any:
    """huggingface_hub's client for the listing calls, with the token the downloads would send.

    huggingface_hub sends its token to whatever endpoint it is given; the rule of
    :mod:`inferfleet.io.token_scope` (https, or plain http to loopback) is applied
    here, so an ``HF_ENDPOINT=http://10.0.0.5`` mirror is listed anonymously, as
    its files are downloaded, and never sees the token in clear.
    """
    from huggingface_hub import HfApi

    base = endpoint.rstrip("/")
    scoped = None if token is None else auth_headers(base + "/api", endpoint=base, token=token)
    # token=False: never fall back to a token huggingface_hub finds by itself;
    # inferfleet decides which token goes where (auth.py).
    return HfApi(endpoint=base, token=token.value if token and scoped else False)


def call_hub(fn: Callable[[], Any], endpoint: str, repo: str, token: Token | None) -> Any:
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

    if offline():  # huggingface_hub read HF_HUB_OFFLINE at import: a verb's --offline is later
        raise OfflineError(
            f"{repo}: no request to the Hub while offline (--offline / HF_HUB_OFFLINE=1)",
            hint="drop --offline / unset HF_HUB_OFFLINE to reach it, or use what is cached",
            where=endpoint,
        )
    why = unreachable(endpoint)
    if why is not None:  # final after one try: huggingface_hub's own backoff never starts
        raise HubError(
            f"{repo}: {why}",
            hint="check HF_ENDPOINT and the network (or run with --offline / HF_HUB_OFFLINE=1)",
            where=endpoint,
        )
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


# Listing and probing are small requests: a few quick tries, the shared policy's shape.
_RETRY = Retry(attempts=4, base=0.5, cap=8.0)


def _with_retries(fn: Callable[[], T]) -> T:
    """``fn()`` under the one retry policy (io/retry.py); the last transient error if all fail."""
    try:
        return retrying(fn, policy=_RETRY)
    except GaveUp as exc:
        raise exc.last from None
