"""The one place an HTTP status becomes an exception.

Every HTTP caller (Hub downloads and manifests, GGUF headers over HTTP, fleet
endpoints) hands a non-2xx answer here with a description of what it asked
(:class:`Asked`), and gets back the error to raise:

- 408, 429 and 5xx are :class:`~inferfleet.errors.TransientError`, with the
  server's ``Retry-After``; :mod:`inferfleet.io.retry` retries them;
- a gated repo (``X-Error-Code: GatedRepo``) is a
  :class:`~inferfleet.errors.GatedError` that says to accept the terms;
  401 and 403 are :class:`~inferfleet.errors.AuthError` naming the token's
  source (never its value). Both are final: never retried (L-07);
- 404 is :class:`~inferfleet.errors.RemoteNotFoundError` (revision, repo or
  file, from ``X-Error-Code``);
- anything else is a plain :class:`~inferfleet.errors.HTTPError`.

At most 1 KiB of the body is ever read for the message, so a huge error page
costs nothing and no error body reaches a file (L-01).

huggingface_hub's ``hf_raise_for_status`` makes the same decisions from the
same headers; it is not called because it only accepts its own httpx2
responses (ours are httpx), reads the whole body, and its messages do not say
which token was used or how to give one to inferfleet.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

import httpx

from inferfleet.errors import (
    AuthError,
    GatedError,
    HTTPError,
    RemoteNotFoundError,
    TransientError,
)


class _Extra(TypedDict):
    where: str
    status: int
    url: str


BODY_LIMIT = 1024
_RETRY_AFTER_CAP = 60.0
HUB_TOKEN_OPTIONS = "HF_TOKEN, `hf auth login`, or --token-file (mode 600)"


@dataclass(frozen=True)
class Asked:
    """What a request was for, so that its error says it and names the fix.

    ``repo`` is set for a Hub repo (its page is ``{endpoint}/{repo}``);
    ``token`` is where the token came from (``"HF_TOKEN"``), None when the
    request went without one; ``token_options`` says how to give one here;
    ``fix`` is the hint for an unexpected status.
    """

    subject: str  # "org/repo", "the GGUF header", "GET /v1/models"
    url: str = ""
    repo: str | None = None
    path: str = ""  # the file inside the repo, for 404s
    endpoint: str = ""
    token: str | None = None
    token_options: str = HUB_TOKEN_OPTIONS
    fix: str = "check the URL and the server's log"


def raise_for_status(response: httpx.Response, asked: Asked) -> None:
    """Return on 2xx, else raise :func:`status_error` (the body read is bounded)."""
    if 200 <= response.status_code < 300:
        return
    raise status_error(response.status_code, response.headers, body_gist(response), asked)


def status_error(status: int, headers: Mapping[str, str], gist: str, asked: Asked) -> HTTPError:
    """The exception for a non-2xx answer (pure: status, headers and body gist in).

    ``headers`` must look names up case-insensitively (httpx's do).
    """
    code = headers.get("x-error-code", "") or ""
    server_says = headers.get("x-error-message", "") or gist
    extra: _Extra = {"where": asked.url, "status": status, "url": asked.url}
    if status in (408, 429) or status >= 500:
        return TransientError(
            f"HTTP {status} for {asked.path or asked.subject}: {gist}",
            hint="the server is busy or failing; run the same command again later",
            retry_after=retry_after(headers.get("retry-after", "") or ""),
            **extra,
        )
    if code == "GatedRepo":
        return _gated(status, server_says, asked, extra)
    if status == 401:
        return _unauthorized(server_says, asked, extra)
    if status == 403:
        gate = (
            f"accept its terms at {_page(asked)}" if asked.repo else "accept its terms on the Hub"
        )
        return AuthError(
            f"{asked.subject}: access denied (HTTP 403): {server_says}",
            hint="the token's scope does not cover this: use a read token, or give a "
            f"fine-grained token read access to it; if the repo is gated, {gate} with the "
            "token's account. Not retried.",
            **extra,
        )
    if status == 404:
        return _not_found(code, asked, extra)
    return HTTPError(
        f"{asked.subject}: unexpected HTTP {status}: {gist}",
        hint=asked.fix,
        **extra,
    )


def _page(asked: Asked) -> str:
    return f"{asked.endpoint.rstrip('/')}/{asked.repo}"


def _gated(status: int, server_says: str, asked: Asked, extra: _Extra) -> HTTPError:
    page = _page(asked) if asked.repo else "its page on the Hub"
    if asked.token is None:
        return GatedError(
            f"{asked.subject} is a gated repo and no token was given (HTTP {status})",
            hint=f"accept its terms at {page} with your account, then give inferfleet "
            f"that account's token: {asked.token_options}",
            **extra,
        )
    return GatedError(
        f"{asked.subject} is a gated repo and the account of the token ({asked.token}) has "
        f"not been granted access yet (HTTP {status}): {server_says}",
        hint=f"open {page}, accept the terms (some gates wait for the owner's approval), "
        "then run the same command again; a fine-grained token also needs "
        "'read access to public gated repos'. Not retried: it will not change by itself.",
        **extra,
    )


def _unauthorized(server_says: str, asked: Asked, extra: _Extra) -> HTTPError:
    if asked.token is not None and "invalid credentials" in server_says.lower():
        return AuthError(
            f"the server refused the token from {asked.token} as invalid (HTTP 401)",
            hint="the token is wrong, expired or revoked: create a new read token and give "
            f"it to inferfleet: {asked.token_options}",
            **extra,
        )
    if asked.token is None:
        return AuthError(
            f"{asked.subject}: authentication required (HTTP 401): the repo is private or missing",
            hint="check the repo id; for a private repo give a token that can read it: "
            f"{asked.token_options}",
            **extra,
        )
    return AuthError(
        f"{asked.subject}: not found or not readable with the token from {asked.token} "
        f"(HTTP 401): {server_says}",
        hint="check the repo id; a fine-grained token needs read access to this repo",
        **extra,
    )


def _not_found(code: str, asked: Asked, extra: _Extra) -> HTTPError:
    if asked.repo is None:
        what, hint = "not found", "check the repository, the revision and the file name in the URL"
    elif code == "RevisionNotFound":
        what = "revision not found"
        hint = "check the branch, tag or commit sha (--revision, or revision: in the fleet file)"
    elif code == "RepoNotFound":
        what, hint = "repo not found", "check the repo id (OWNER/NAME) and the endpoint"
    else:
        what = f"{asked.path or 'the resource'} is not in the repo at this revision"
        hint = (
            "it was removed or renamed upstream: pin a commit sha in the fleet file "
            "(revision:) and regenerate the manifest (inferfleet models manifest)"
        )
    return RemoteNotFoundError(f"{asked.subject}: {what} (HTTP 404)", hint=hint, **extra)


def retry_after(raw: str, *, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds, clamped to ``[0, 60]``; None when absent or unreadable.

    Either delay-seconds or an HTTP-date (RFC 9110). A hostile or broken
    server gets no say beyond the clamp: a negative delay or a date in the
    past means "now", NaN, garbage and a malformed date mean "not given"
    (the policy's own backoff applies), a huge one waits the cap.
    """
    text = raw.strip()
    if not text:
        return None
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _date_delay(text, time.time() if now is None else now)
    if seconds is None or math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), _RETRY_AFTER_CAP)


def _date_delay(text: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an obsolete date without a zone: RFC 9110 says GMT
        when = when.replace(tzinfo=datetime.UTC)
    try:
        return when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None


def body_gist(response: httpx.Response) -> str:
    """At most 1 KiB of an error body, one line; never the whole of a huge body."""
    try:
        if response.is_stream_consumed or hasattr(response, "_content"):
            raw = response.content[:BODY_LIMIT]
        else:
            raw = b""
            for piece in response.iter_raw():
                raw += piece
                if len(raw) >= BODY_LIMIT:
                    break
            raw = raw[:BODY_LIMIT]
    except (httpx.HTTPError, httpx.StreamError):
        raw = b""
    return raw.decode("utf-8", "replace").strip().replace("\n", " ")[:300]
