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

:func:`raise_for_hub_status` hands a status to :mod:`inferfleet.io.http_errors`,
the one place a status becomes an exception for every HTTP caller: auth and
gate answers are final (L-07), 429/5xx are transient and retried by the
caller (:mod:`inferfleet.io.retry`), and no error body ever reaches a file
(L-01). Redirects are followed hop by hop by :func:`inferfleet.io.http.send`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from inferfleet.errors import HTTPError, TransientError
from inferfleet.hub.auth import Token, auth_headers
from inferfleet.hub.errors import HubError
from inferfleet.io import http, http_errors

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


# The name hub.manifest catches and raises (artifacts/ takes it over).
Transient = TransientError


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


def asked(
    *, endpoint: str, repo: str, path: str, token: Token | None, url: str = ""
) -> http_errors.Asked:
    """What a Hub request was for, as the one status mapper needs it."""
    return http_errors.Asked(
        subject=repo,
        url=url,
        repo=repo,
        path=path,
        endpoint=endpoint,
        token=None if token is None else token.source,
        fix="nothing was written; check the endpoint (HF_ENDPOINT / --endpoint)",
    )


def raise_for_hub_status(
    response: httpx.Response, *, repo: str, path: str, token: Token | None, endpoint: str
) -> None:
    """Turn a non-2xx answer into the right error; read at most 1 KiB of its body."""
    url = str(response.request.url) if _has_request(response) else ""
    http_errors.raise_for_status(
        response, asked(endpoint=endpoint, repo=repo, path=path, token=token, url=url)
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
) -> HTTPError:
    """The exception for a non-2xx answer (pure), for callers that hold no httpx answer."""
    what = asked(endpoint=endpoint, repo=repo, path=path, token=token, url=where)
    return http_errors.status_error(status, headers, gist, what)


@dataclass(frozen=True)
class HubFile:
    """One file of a repository at a revision, on an endpoint, with the token we may send."""

    endpoint: str
    repo: str
    revision: str
    path: str
    token: Token | None

    @property
    def url(self) -> str:
        return resolve_url(self.endpoint, self.repo, self.revision, self.path)

    def headers(self, url: str) -> dict[str, str]:
        """Auth headers for one hop: the token only where io.token_scope allows."""
        return auth_headers(url, endpoint=self.endpoint, token=self.token)

    def raise_for_status(self, answer: httpx.Response) -> None:
        raise_for_hub_status(
            answer, repo=self.repo, path=self.path, token=self.token, endpoint=self.endpoint
        )


def probe(client: httpx.Client, file: HubFile) -> RemoteFile:
    """Size and hash of one file from HEAD answers, never from a redirect page (L-02).

    An LFS file's first answer (a redirect with ``X-Linked-Size``) is kept and
    read, never followed; a non-LFS file's 307 is followed to the file itself.
    """
    answer = http.send(
        client,
        "HEAD",
        file.url,
        headers_for=file.headers,
        keep_redirect=lambda first: linked(first).size is not None,
    )
    info = linked(answer)
    if not answer.is_redirect:
        file.raise_for_status(answer)
    if info.size is not None:
        # LFS: the first answer is authoritative; the CDN's ETag is not a sha256.
        return RemoteFile(size=info.size, sha256=info.sha256, gitsha1=None)
    size = content_length(answer)
    if size is None:
        raise HubError(
            f"{file.repo}/{file.path}: the server gave no Content-Length for the file",
            hint="use an endpoint that speaks the Hub's API (HF_ENDPOINT / --endpoint)",
            where=str(answer.url),
        )
    etag = normalize_etag(answer.headers.get("etag"))
    return RemoteFile(size=size, sha256=None, gitsha1=etag if _is_sha1(etag) else None)


def open_stream(
    client: httpx.Client,
    file: HubFile,
    *,
    start: int,
    check_first: Callable[[Linked], None] = lambda _linked: None,
) -> httpx.Response:
    """GET the file from byte ``start``, following redirects hop by hop.

    No ``Range`` header at all when ``start`` is 0 (L-03: the Xet CDN answers
    400 to ``bytes=0-``). The token goes only where
    :mod:`~inferfleet.io.token_scope` allows. ``check_first`` sees the
    resolve's ``X-Linked-*`` before the redirect is followed, so a refused
    file costs no CDN request. The returned response is open (streaming) and
    2xx; the caller closes it.
    """

    def headers_for(url: str) -> dict[str, str]:
        headers = file.headers(url)
        if start > 0:
            headers["Range"] = f"bytes={start}-"
        return headers

    def look(first: httpx.Response) -> bool:
        info = linked(first)
        if info.size is not None:
            check_first(info)
        return False  # always followed: the bytes are behind it

    response = http.send(
        client,
        "GET",
        file.url,
        headers_for=headers_for,
        stream=True,
        keep_redirect=look,
    )
    try:
        file.raise_for_status(response)
    except BaseException:
        response.close()
        raise
    return response


def _is_sha1(value: str | None) -> bool:
    return value is not None and bool(_HEX40.match(value))


def _has_request(response: httpx.Response) -> bool:
    try:
        response.request  # noqa: B018 - raises RuntimeError when built by hand
    except RuntimeError:
        return False
    return True
