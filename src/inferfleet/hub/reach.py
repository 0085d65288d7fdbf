"""Whether the Hub endpoint can be reached at all, asked once before any request.

A name that does not resolve or a refused connection will not change in the
seconds a retry loop waits: it is final after one try. Without this, every
model of a fleet paid the full backoff (ours, and huggingface_hub's own
``http_backoff`` inside ``HfApi`` listings: 4 x 5 tries), 1m39s and 20
"Retrying" lines for one DNS failure. A timeout or a reset is not judged
here: those stay transient (io/retry.py).

With a proxy configured for the endpoint the proxy, not this machine,
resolves and connects: nothing is judged before the request then.
"""

from __future__ import annotations

import errno
import socket
import urllib.request
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 5.0


def unreachable(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be reached (its name does not resolve, or the connection
    is refused), or None when it may be (then requests go ahead, retried as usual).

    Not remembered here: a caller that asks for many models keeps the answer
    (headers.ModelSources), and a port refused now may serve a moment later."""
    parts = urlsplit(endpoint)
    host = parts.hostname
    if host is None or _proxied(parts.scheme, host):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    why = _try_connect(host, port)
    return None if why is None else f"{endpoint} cannot be reached: {why}"


def _try_connect(host: str, port: int) -> str | None:
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"the name {host!r} does not resolve ({exc.strerror})"
    refused = ""
    for family, kind, proto, _name, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                sock.connect(address)
            except ConnectionRefusedError:
                refused = f"connection refused by {host} port {port}"
                continue
            except OSError as exc:
                if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                    refused = f"no route to {host} ({exc.strerror})"
                    continue
                return None  # a timeout or anything else: not judged here
            return None
    return refused or None


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    return scheme in proxies and not urllib.request.proxy_bypass(host)
