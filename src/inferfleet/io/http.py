"""The one place inferfleet builds HTTP clients, and follows redirects.

Every request goes through a client made here, so timeouts, the user agent,
proxies and certificates are decided once, by what the client is for:

- ``purpose="fleet"``: the fleet's own endpoints, on loopback or the LAN.
  The environment's proxy settings are ignored (``trust_env`` off): a
  corporate ``HTTPS_PROXY`` cannot reach 127.0.0.1 or a GPU box on the LAN,
  and would turn every health check into a proxy error.
- ``purpose="remote"``: the Hub, its mirrors and CDNs, any URL a user gives.
  ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` are honoured
  exactly as huggingface_hub honours them (httpx's ``trust_env``).

Both verify TLS against ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set (what
httpx, and so huggingface_hub, read), else ``REQUESTS_CA_BUNDLE`` (what
``requests``, and huggingface_hub before 1.0, read: corporate setups still
set only that one), else certifi's bundle. The fleet's own TLS front may use
a private CA too.

Redirects are never followed by httpx itself: :func:`send` follows them hop
by hop, so each hop gets its own headers (a token only on its own origin,
:mod:`inferfleet.io.token_scope`) and a caller can read a redirect's own
headers, as the Hub's ``X-Linked-*`` require (L-02).

Tests point clients at real local servers rather than patching them.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable, Mapping
from typing import Literal
from urllib.parse import urljoin

import certifi
import httpx

from inferfleet import __version__
from inferfleet.errors import HTTPError, OfflineError, TransientError
from inferfleet.io.http_errors import Asked
from inferfleet.io.http_errors import raise_for_status as _raise_for_status
from inferfleet.io.offline import offline

USER_AGENT = f"inferfleet/{__version__}"
MAX_REDIRECTS = 5

Purpose = Literal["fleet", "remote"]


def client(
    *,
    purpose: Purpose = "fleet",
    timeout: float = 10.0,
    base_url: str = "",
    plain_http: bool = False,
    verify: ssl.SSLContext | None = None,
    key: str | None = None,
) -> httpx.Client:
    """A synchronous client with explicit timeouts; proxies only for ``remote``.

    ``plain_http``: every URL it is given is ``http://`` (a health gate polling
    its own server while that server loads): the CA bundle is not loaded, and
    an ``https://`` URL fails verification instead of being trusted.
    ``verify``: the certificates to trust instead of the environment's (a
    local CA's root, e.g. the auth proxy's).
    ``key``: a fleet server's API key, sent with every request (L-58); only a
    client of one server takes it.
    """
    headers = {"User-Agent": USER_AGENT}
    hooks = {"request": [_not_offline]} if purpose == "remote" else {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.Client(
        base_url=base_url,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        headers=headers,
        follow_redirects=False,  # see send(): several lessons read the first answer (L-02)
        trust_env=purpose == "remote",
        event_hooks=hooks,
        verify=verify or (_trusting_nothing() if plain_http else tls_context()),
    )


def _not_offline(request: httpx.Request) -> None:
    """Offline, a remote client sends nothing (:mod:`inferfleet.io.offline`): the one guard
    every Hub, mirror and user-given URL passes, whichever path asked."""
    if offline():
        raise OfflineError(
            f"no network request while offline: {request.method} {request.url.host}",
            hint="drop --offline / unset HF_HUB_OFFLINE=1 to reach it, or use what is cached",
            url=str(request.url.copy_with(query=None)),
        )


@functools.lru_cache(maxsize=1)
def _trusting_nothing() -> ssl.SSLContext:
    # Verifying, with no CA loaded: every certificate fails.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def tls_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The certificates to trust, from the environment (see the module's doc)."""
    env = os.environ if environ is None else environ
    return _tls_context(
        env.get("SSL_CERT_FILE") or None,
        env.get("SSL_CERT_DIR") or None,
        env.get("REQUESTS_CA_BUNDLE") or None,
    )


@functools.lru_cache(maxsize=8)
def _tls_context(cafile: str | None, capath: str | None, bundle: str | None) -> ssl.SSLContext:
    # Loading a CA bundle costs milliseconds and clients are made per
    # command; a context is safe to share between clients and threads.
    try:
        if cafile or capath:
            return ssl.create_default_context(cafile=cafile, capath=capath)
        if bundle:
            return ssl.create_default_context(cafile=bundle)
    except (OSError, ssl.SSLError) as exc:
        raise HTTPError(
            f"cannot load the CA certificates named by the environment: {exc}",
            hint="fix or unset SSL_CERT_FILE / SSL_CERT_DIR / REQUESTS_CA_BUNDLE",
        ) from None
    return ssl.create_default_context(cafile=certifi.where())


def send(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    headers_for: Callable[[str], dict[str, str]] = lambda _url: {},
    stream: bool = False,
    keep_redirect: Callable[[httpx.Response], bool] = lambda _answer: False,
    max_redirects: int = MAX_REDIRECTS,
) -> httpx.Response:
    """Send ``method url``, following redirects hop by hop; the final answer is returned.

    ``headers_for(url)`` gives each hop its headers, so a token goes only
    where :mod:`~inferfleet.io.token_scope` allows. ``keep_redirect(answer)``
    sees every redirect before it is followed: True returns that redirect
    itself (its headers say what the caller needs), and an exception it
    raises stops here. A failure below HTTP (refused, reset, timed out) is a
    :class:`~inferfleet.errors.TransientError`. With ``stream`` the answer is
    open and the caller closes it; any status is returned as it is.
    """
    for _hop in range(max_redirects + 1):
        request = client.build_request(method, url, headers=headers_for(url))
        try:
            answer = client.send(request, stream=stream)
        except httpx.TransportError as exc:
            raise TransientError(
                f"{type(exc).__name__} on {url}: {exc}",
                hint="check the network, the URL, and any proxy (HTTPS_PROXY / NO_PROXY)",
                where=url,
                url=url,
            ) from exc
        if not answer.is_redirect:
            return answer
        try:
            keep = keep_redirect(answer)
        except BaseException:
            answer.close()
            raise
        if keep:
            return answer
        answer.close()
        url = urljoin(url, answer.headers["location"])
    raise HTTPError(
        f"more than {max_redirects} redirects",
        hint="the server sends requests in a loop: check the URL or the endpoint (HF_ENDPOINT)",
        where=url,
        url=url,
    )


def raise_for_status(response: httpx.Response, *, what: str) -> None:
    """A fleet endpoint's non-2xx answer as the error :mod:`.http_errors` maps it to."""
    _raise_for_status(
        response,
        Asked(
            subject=what,
            url=str(response.request.url),
            token_options="the service's API key",
            fix="check the service's log (inferfleet logs SERVICE)",
        ),
    )


def is_stale_connection(exc: BaseException) -> bool:
    """A pooled keep-alive connection the server had already closed.

    The request failed before any answer came back: it never reached the
    server and can be sent once more on a fresh connection, as OpenAI's own
    client does (llama.cpp's server drops idle connections after a few
    seconds).
    """
    return isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError)


def failure_reason(exc: httpx.TransportError) -> str:
    """A few words for a request that got no answer, for tables and notes."""
    if isinstance(exc, httpx.ConnectTimeout | httpx.ReadTimeout):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or no route"
    return type(exc).__name__
