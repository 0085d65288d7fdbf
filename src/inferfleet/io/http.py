"""The one place inferfleet builds HTTP clients.

Every request goes through a client made here, so timeouts, the user agent
and error mapping are the same everywhere, and tests point it at real local
servers rather than patching it.
"""

from __future__ import annotations

import httpx

from inferfleet import __version__
from inferfleet.errors import HTTPError

USER_AGENT = f"inferfleet/{__version__}"


def client(
    *, timeout: float = 10.0, base_url: str = "", follow_redirects: bool = False
) -> httpx.Client:
    """A synchronous client with explicit timeouts and no proxy surprises.

    Redirects are not followed unless asked: several lessons (L-02) depend on
    reading the first answer's headers.
    """
    return httpx.Client(
        base_url=base_url,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=follow_redirects,
        # Endpoints are on loopback or the fleet's own LAN; a proxy from the
        # environment would only get in the way.
        trust_env=False,
    )


def raise_for_status(response: httpx.Response, *, what: str) -> None:
    """Turn a non-2xx answer into an :class:`HTTPError` with the body's gist."""
    if 200 <= response.status_code < 300:
        return
    body = response.text[:300].strip().replace("\n", " ")
    raise HTTPError(
        f"{what}: HTTP {response.status_code} from {response.request.url}: {body}",
        hint="check the service's log (inferfleet logs SERVICE)",
    )
