"""The one rule for where a Hub token may go.

A token is sent to a URL only when the URL's origin (scheme, host and port)
is the configured endpoint's (``--endpoint``, else ``HF_ENDPOINT``, else
https://huggingface.co), or one of Hugging Face's own origins
(https://huggingface.co, https://hf.co). That is what huggingface_hub does:
a token configured for a mirror goes to that mirror, and to the Hub.

Only over https, or plain http to this machine's loopback (a mirror on
``http://10.0.0.5`` gets no token: anyone on the path would read it).
Everything else gets no ``Authorization``: a CDN a download is redirected
to (it gets a signed URL), another port or scheme of the same host, a
look-alike host (``huggingface.co.example``), a subdomain
(``cdn-lfs.hf.co``). The rule is applied to every hop of a redirect chain
(:func:`inferfleet.io.http.send` asks for each hop's headers), so a redirect
can never carry the token to another origin (L-06 in spirit: a credential
goes only where it is meant to go).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://huggingface.co"
# Hugging Face's own origins (huggingface_hub forwards its token to these too).
HF_ORIGINS = (DEFAULT_ENDPOINT, "https://hf.co")

Origin = tuple[str, str, int]


def hub_endpoint(option: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``option`` (``--endpoint``), else ``HF_ENDPOINT``, else the Hub; no trailing slash."""
    env = os.environ if environ is None else environ
    return (option or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")


def origin(url: str) -> Origin:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


def may_send_token(url: str, *, endpoint: str) -> bool:
    """Whether a Hub token may be sent to ``url`` (see the module's doc)."""
    target = origin(url)
    if not encrypted_or_local(target):
        return False
    return target in {origin(endpoint), *(origin(o) for o in HF_ORIGINS)}


def encrypted_or_local(target: Origin) -> bool:
    """https, or plain http to this machine's loopback (the bytes never leave it).

    A token sent over plain http to another machine is readable by everyone
    on the path, whatever ``HF_ENDPOINT`` says: an ``http://`` mirror on the
    LAN gets no token.
    """
    scheme, host, _port = target
    if scheme == "https":
        return True
    if scheme != "http":
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer(url: str, *, endpoint: str, token: str | None) -> dict[str, str]:
    """``Authorization: Bearer`` for ``url`` when the rule allows it, else nothing."""
    if token is None or not may_send_token(url, endpoint=endpoint):
        return {}
    return {"Authorization": f"Bearer {token}"}
