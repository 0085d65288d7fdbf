"""The Hub's wire shapes: resolve URLs, redirects, ``X-Linked-*`` and status codes.

What the Hub answers to ``GET {endpoint}/{repo}/resolve/{revision}/{path}``:

- an LFS file: ``302`` to a CDN, with ``X-Linked-Size`` and
  ``X-Linked-Etag`` (the sha256) on that *first* answer. On Xet-backed repos
  the CDN's own ETag is a CAS hash, not the sha256, so the size and hash are
  read here and the redirect is never trusted for them (L-02);
- a non-LFS file: ``307`` to another resolve path, *without* ``X-Linked-Size``.
  That answer's ``Content-Length`` is the redirect page (~250 bytes), not the
  file: follow it and take the size from the file's own answer (L-02);
- errors carry ``X-Error-Code`` (``GatedRepo``, ``RepoNotFound``,
  ``EntryNotFound``, ``RevisionNotFound``) and ``X-Error-Message``.

:func:`raise_for_hub_status` is the one place a status becomes an exception:
auth and gate answers are final (L-07), 429/5xx are :class:`Transient` and
retried by the caller, and no error body ever reaches a file (L-01).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, urljoin

import httpx

from inferfleet.hub.auth import Token, auth_headers
from inferfleet.hub.errors import AuthError, FetchError, GatedRepoError, HubError, HubNotFoundError

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
MAX_HOPS = 4
_ERROR_BODY_LIMIT = 1024


class Transient(Exception):
    """A failure worth retrying (5xx, 429, a reset, a stall); not a FleetError."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Linked:
    """What the first answer of a resolve says about the file (L-02)."""

    size: int | None  # X-Linked-Size: LFS files only
    sha256: str | None  # X-Linked-Etag when it is a sha256
    commit: str | None  # X-Repo-Commit


@dataclass(frozen=True)
class RemoteFile:
    """Size and hashes of one file as the Hub serves it."""

    size: int
    sha256: str | None  # LFS files
    gitsha1: str | None  # non-LFS files: the git blob id (their ETag)


def resolve_url(endpoint: str, repo: str, revision: str, path: str) -> str:
    return (
        f"{endpoint.rstrip('/')}/{repo}/resolve/{quote(revision, safe='')}/{quote(path, safe='/')}"
    )


def normalize_etag(value: str | None) -> str | None:
    """``W/"abc"`` and ``"abc"`` -> ``abc``."""
    if value is None:
        return None
    text = value.strip()
    if text.startswith("W/"):
        text = text[2:]
    return text.strip('"').lower() or None


def is_sha256(value: str | None) -> bool:
    return value is not None and bool(_HEX64.match(value))


def linked(response: httpx.Response) -> Linked:
    """Read ``X-Linked-Size`` / ``X-Linked-Etag`` / ``X-Repo-Commit`` (pure)."""
    raw_size = response.headers.get("x-linked-size")
    size = int(raw_size) if raw_size is not None and raw_size.strip().isdigit() else None
    etag = normalize_etag(response.headers.get("x-linked-etag"))
    commit = response.headers.get("x-repo-commit")
    return Linked(size=size, sha256=etag if is_sha256(etag) else None, commit=commit)


def content_length(response: httpx.Response) -> int | None:
    raw = response.headers.get("content-length")
    return int(raw) if raw is not None and raw.strip().isdigit() else None


def raise_for_hub_status(
    response: httpx.Response, *, repo: str, path: str, token: Token | None, endpoint: str
) -> None:
    """Turn a non-2xx answer into the right error; read at most 1 KiB of its body."""
    if 200 <= response.status_code < 300:
        return
    raise hub_error(
        response.status_code,
        response.headers,
        _body_gist(response),
        where=str(response.request.url) if _has_request(response) else "",
        repo=repo,
        path=path,
        token=token,
        endpoint=endpoint,
    )


def hub_error(
    status: int,
    headers: Mapping[str, str],
    gist: str,
    *,
    where: str,
    repo: str,
    path: str,
    token: Token | None,
    endpoint: str,
) -> Exception:
    """The exception for a non-2xx answer (pure: status, headers and body gist in).

    ``headers`` must look names up case-insensitively (httpx's do).
    """
    code = headers.get("x-error-code", "") or ""
    server_says = headers.get("x-error-message", "") or gist
    page = f"{endpoint.rstrip('/')}/{repo}"
    if status in (408, 429) or status >= 500:
        retry_after = _retry_after(headers.get("retry-after", "") or "")
        return Transient(f"HTTP {status} for {path}: {gist}", retry_after=retry_after)
    if code == "GatedRepo":
        if token is None:
            return GatedRepoError(
                f"{repo} is a gated repo and no token was given (HTTP {status})",
                hint=f"accept its terms at {page} with your account, then give inferfleet "
                "that account's token: HF_TOKEN, `hf auth login`, or --token-file (mode 600)",
                where=where,
            )
        return GatedRepoError(
            f"{repo} is a gated repo and the account of the token ({token.source}) has not "
            f"been granted access yet (HTTP {status}): {server_says}",
            hint=f"open {page}, accept the terms (some gates wait for the owner's approval), "
            "then run the same command again; a fine-grained token also needs "
            "'read access to public gated repos'. Not retried: it will not change by itself.",
            where=where,
        )
    if status == 401:
        if token is not None and "invalid credentials" in server_says.lower():
            return AuthError(
                f"the Hub refused the token from {token.source} as invalid (HTTP 401)",
                hint="the token is wrong, expired or revoked: create a new read token and "
                "set HF_TOKEN (or --token-file) to it",
                where=where,
            )
        if token is None:
            return AuthError(
                f"{repo}: authentication required (HTTP 401): the repo is private or missing",
                hint="check the repo id; for a private repo give a token that can read it: "
                "HF_TOKEN, `hf auth login`, or --token-file (mode 600)",
                where=where,
            )
        return AuthError(
            f"{repo}: not found or not readable with the token from {token.source} "
            f"(HTTP 401): {server_says}",
            hint="check the repo id; a fine-grained token needs read access to this repo",
            where=where,
        )
    if status == 403:
        return AuthError(
            f"{repo}: access denied (HTTP 403): {server_says}",
            hint="the token's scope does not cover this repo: use a read token, or give a "
            "fine-grained token read access to it. Not retried.",
            where=where,
        )
    if status == 404:
        what, hint = {
            "RevisionNotFound": (
                "revision not found",
                "check the branch, tag or commit sha (--revision, or revision: in the fleet file)",
            ),
            "RepoNotFound": ("repo not found", "check the repo id (OWNER/NAME) and the endpoint"),
        }.get(
            code,
            (
                f"{path or 'the resource'} is not in the repo at this revision",
                "it was removed or renamed upstream: pin a commit sha in the fleet file "
                "(revision:) and regenerate the manifest (inferfleet models manifest)",
            ),
        )
        return HubNotFoundError(f"{repo}: {what} (HTTP 404)", hint=hint, where=where)
    return FetchError(
        f"{repo}/{path}: unexpected HTTP {status}: {gist}",
        hint="nothing was written; check the endpoint (HF_ENDPOINT / --endpoint)",
        where=where,
    )


def probe(
    client: httpx.Client,
    *,
    endpoint: str,
    repo: str,
    revision: str,
    path: str,
    token: Token | None,
) -> RemoteFile:
    """Size and hash of one file from HEAD answers, never from a redirect page (L-02)."""
    url = resolve_url(endpoint, repo, revision, path)
    for _hop in range(MAX_HOPS):
        try:
            response = client.request(
                "HEAD", url, headers=auth_headers(url, endpoint=endpoint, token=token)
            )
        except httpx.TransportError as exc:
            raise Transient(f"{type(exc).__name__} on {path}: {exc}") from exc
        info = linked(response)
        if response.is_redirect:
            if info.size is not None:
                # LFS: the first answer is authoritative; the CDN's ETag is not a sha256.
                return RemoteFile(size=info.size, sha256=info.sha256, gitsha1=None)
            url = urljoin(url, response.headers["location"])
            continue
        raise_for_hub_status(response, repo=repo, path=path, token=token, endpoint=endpoint)
        size = content_length(response)
        if size is None:
            raise HubError(
                f"{repo}/{path}: the server gave no Content-Length for the file",
                hint="use an endpoint that speaks the Hub's API (HF_ENDPOINT / --endpoint)",
                where=url,
            )
        etag = normalize_etag(response.headers.get("etag"))
        if info.size is not None:
            return RemoteFile(size=info.size, sha256=info.sha256, gitsha1=None)
        return RemoteFile(size=size, sha256=None, gitsha1=etag if _is_sha1(etag) else None)
    raise HubError(
        f"{repo}/{path}: more than {MAX_HOPS} redirects",
        hint="check the endpoint (HF_ENDPOINT / --endpoint)",
        where=url,
    )


def open_stream(
    client: httpx.Client,
    *,
    endpoint: str,
    repo: str,
    revision: str,
    path: str,
    token: Token | None,
    start: int,
    check_first: Callable[[Linked], None] = lambda _linked: None,
) -> httpx.Response:
    """GET the file from byte ``start``, following redirects by hand.

    No ``Range`` header at all when ``start`` is 0 (L-03: the Xet CDN answers
    400 to ``bytes=0-``). The token goes only to the endpoint's origin.
    ``check_first`` sees the resolve's ``X-Linked-*`` before the redirect is
    followed, so a refused file costs no CDN request. The returned response
    is open (streaming) and 2xx; the caller closes it.
    """
    url = resolve_url(endpoint, repo, revision, path)
    for _hop in range(MAX_HOPS):
        headers = auth_headers(url, endpoint=endpoint, token=token)
        if start > 0:
            headers["Range"] = f"bytes={start}-"
        try:
            response = client.send(client.build_request("GET", url, headers=headers), stream=True)
        except httpx.TransportError as exc:
            raise Transient(f"{type(exc).__name__} on {path}: {exc}") from exc
        if response.is_redirect:
            location = response.headers.get("location")
            response.close()
            info = linked(response)
            if info.size is not None:
                check_first(info)
            if not location:
                raise HubError(f"{repo}/{path}: redirect without a Location", where=url)
            url = urljoin(url, location)
            continue
        try:
            raise_for_hub_status(response, repo=repo, path=path, token=token, endpoint=endpoint)
        except BaseException:
            response.close()
            raise
        return response
    raise HubError(f"{repo}/{path}: more than {MAX_HOPS} redirects", where=url)


def _is_sha1(value: str | None) -> bool:
    return value is not None and bool(_HEX40.match(value))


def _has_request(response: httpx.Response) -> bool:
    try:
        response.request  # noqa: B018 - raises RuntimeError when built by hand
    except RuntimeError:
        return False
    return True


def _body_gist(response: httpx.Response) -> str:
    """At most 1 KiB of an error body, one line; never the whole of a huge body."""
    try:
        if response.is_stream_consumed or hasattr(response, "_content"):
            raw = response.content[:_ERROR_BODY_LIMIT]
        else:
            raw = b""
            for piece in response.iter_raw():
                raw += piece
                if len(raw) >= _ERROR_BODY_LIMIT:
                    break
            raw = raw[:_ERROR_BODY_LIMIT]
    except (httpx.HTTPError, httpx.StreamError):
        raw = b""
    return raw.decode("utf-8", "replace").strip().replace("\n", " ")[:300]


def _retry_after(raw: str) -> float | None:
    try:
        return min(float(raw.strip()), 60.0) if raw.strip() else None
    except ValueError:
        return None
