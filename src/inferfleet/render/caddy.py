"""The auth proxy's Caddyfile, rendered from the fleet (L-58, L-55).

``caddyfile(fleet, host)`` is a pure function: the fleet's ``proxy:`` (and
the gateway and services it fronts) in, the text of the Caddyfile for the
host the proxy runs on out. Built as a tree of blocks here rather than from a
template: inferfleet renders every other artifact from data the same way, and
each token that comes from the fleet is quoted by one function.

What it says:

- **TLS**: ``tls internal`` (Caddy's own local CA; clients trust its root,
  ``pki/authorities/local/root.crt`` under Caddy's data dir) for the LAN, with
  no port-80 listener; ``acme``: public certificates for ``names`` (the
  account email and directory from ``acme_email`` / ``acme_ca``), with Caddy's
  HTTP challenge and redirect listener on port 80 of the same address. Caddy
  never touches the system trust store (``skip_install_trust``) and has no
  admin endpoint (``admin off``): it is stopped by pid.
- **Auth**: ``bearer`` compares the ``Authorization`` header with each key
  variable of ``key_names`` as a runtime placeholder ``{env.NAME}`` (the
  process environment, loaded from ``keys_env``): no key is ever written here
  (L-55), and an unset or empty variable never matches. Anything else is a 401
  in OpenAI's error shape. ``forward_auth`` asks the Authentik or Authelia
  outpost about every request and copies the identity headers its Caddy guide
  lists; those headers are deleted from the client's request first, so a
  client cannot bring its own. Caddy trusts no client as a proxy: the
  outpost sees X-Forwarded-* as Caddy observed the connection.
- **Routing, by path**: with a gateway declared, everything not routed
  otherwise goes to the gateway (its ``/v1/...`` unchanged); each service in
  ``proxy.services`` is reached under ``/<service>/`` with that prefix
  stripped (``https://ai.lan/chat/v1/chat/completions``). Path routing needs
  one name and one certificate; host routing would need a DNS name per
  service. Without a gateway, an unrouted path is a 404.
- **Streaming**: ``flush_interval -1`` writes every upstream chunk at once
  (server-sent events arrive token by token, never buffered).
- **Timeouts** for long generations: the upstream may take the gateway's
  request timeout (default 600 s) before its response headers (a non-streamed
  completion answers only when done); no write timeout, so a long stream is
  never cut; request headers within 10 s and bodies within 60 s.
- **Its own health**: ``/healthz`` answers 200 ``ok`` without a key (before
  the auth): the deploy's health gate and ``status`` ask it over TLS; it says
  nothing about the upstreams.
- **Health**: Caddy polls each upstream's health path every 10 s and answers
  503 at once while it is down, instead of holding the client on a dead
  socket.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from inferfleet.errors import UsageError
from inferfleet.fleetfile.exposure import Outpost, Proxy, outpost_of
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render import gateway as render_gateway
from inferfleet.render.endpoints import dial_address, host_port
from inferfleet.render.service_keys import front_variable, keyed

# Copied from the outpost's answer into the request the upstream gets (the outposts'
# own Caddy guides: goauthentik.io "Caddy" proxy server; authelia.com "Caddy").
COPY_HEADERS: dict[Outpost, tuple[str, ...]] = {
    "authentik": (
        "X-Authentik-Username", "X-Authentik-Groups", "X-Authentik-Entitlements",
        "X-Authentik-Email", "X-Authentik-Name", "X-Authentik-Uid", "X-Authentik-Jwt",
        "X-Authentik-Meta-Jwks", "X-Authentik-Meta-Outpost", "X-Authentik-Meta-Provider",
        "X-Authentik-Meta-App", "X-Authentik-Meta-Version",
    ),
    "authelia": ("Remote-User", "Remote-Groups", "Remote-Email", "Remote-Name"),
}  # fmt: skip
# Authentik's login flow comes back through the proxy under this path.
AUTHENTIK_OUTPOST_PATH = "/outpost.goauthentik.io/*"
HEALTH_PATH = "/healthz"  # Caddy's own answer, unauthenticated: the proxy is up
GATEWAY_HEALTH_PATH = "/health/liveliness"  # LiteLLM proxy: alive, without a key
DEFAULT_TIMEOUT_S = 600.0  # before response headers, when no gateway states one
HEALTH_INTERVAL = "10s"
HEALTH_TIMEOUT = "5s"
DIAL_TIMEOUT = "5s"
# Idle upstream connections are dropped before the upstream drops them: LiteLLM's uvicorn
# and llama-server close an idle keep-alive connection after 5 s, and a request sent on a
# connection the upstream is closing at that moment fails mid-response (Caddy's default
# keeps idle connections for 2 minutes).
UPSTREAM_KEEPALIVE = "2s"
# The gateway keeps idle connections longer (render.gateway.KEEPALIVE_S): Caddy keeps its
# own to it for less than that, so a request between two a few seconds apart reuses one
# (a new connection cost the hop 3-4 ms here) and still never meets a closing one.
GATEWAY_KEEPALIVE = f"{render_gateway.KEEPALIVE_S - 15}s"
READ_HEADER_TIMEOUT = "10s"
READ_BODY_TIMEOUT = "60s"
IDLE_TIMEOUT = "5m"
MAX_BODY = "100MB"  # prompts with images stay far below; a runaway upload does not
UNAUTHORIZED = (
    '{"error":{"message":"missing or wrong API key: send Authorization: Bearer <key>",'
    '"type":"invalid_request_error","code":"invalid_api_key"}}'
)
NOT_ROUTED = '{"error":{"message":"no route for this path","type":"not_found_error"}}'

# Bare tokens: no quote, brace, '<' (a heredoc starts with "<<") or '#' (a comment).
_BARE = re.compile(r"^[A-Za-z0-9._:/*@+=,\[\]-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Placeholder:
    """An environment variable Caddy reads at run time, written by inferfleet itself:
    the only braces a rendered Caddyfile holds (``{env.NAME}`` after ``prefix``)."""

    name: str
    prefix: str = ""

    def __str__(self) -> str:
        if not _ENV_NAME.match(self.name):
            raise UsageError(f"{self.name!r} is not an environment variable name")
        return f"{self.prefix}{{env.{self.name}}}"


def token(value: str | Placeholder) -> str:
    """One Caddyfile token: as is when plain, else double-quoted with escapes.

    A fleet value never holds a brace: Caddy expands ``{$VAR}`` while it reads
    the file (quoted or not) and ``{env.VAR}``, ``{http.*}`` and the rest where
    the directive runs, so ``acme_email: "{$KEY}@x"`` would send a key of its
    environment to whoever the fleet names. Only a :class:`Placeholder` writes one.
    """
    text = str(value)
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in text):
        raise UsageError(f"a control character in {text!r} cannot be written to a Caddyfile")
    if not isinstance(value, Placeholder) and any(ch in text for ch in "{}"):
        raise UsageError(
            f"{text!r} cannot be written to a Caddyfile: Caddy reads '{{...}}' as a "
            "placeholder ({$VAR}, {env.VAR}, {http.*}) and would put its environment's "
            "values (the proxy's keys) there",
            hint="remove the braces from the fleet value (percent-encode them in a path: %7B %7D)",
        )
    if text and _BARE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Block:
    """A directive line with an optional ``{ ... }`` body of lines and blocks."""

    head: str
    body: list[Block | str] = field(default_factory=list)

    def lines(self, depth: int = 0) -> list[str]:
        indent = "\t" * depth
        if not self.body:
            return [indent + self.head]
        out = [f"{indent}{self.head} {{" if self.head else indent + "{"]
        for item in self.body:
            if isinstance(item, Block):
                out += item.lines(depth + 1)
            else:
                out.append("\t" * (depth + 1) + item)
        out.append(indent + "}")
        return out


def _line(*tokens: str | Placeholder) -> str:
    return " ".join(token(t) for t in tokens)


def _duration(seconds: float) -> str:
    return f"{round(seconds)}s"


def _unspecified(bind: str) -> bool:
    return ipaddress.ip_address(bind).is_unspecified


def _site_addresses(proxy: Proxy) -> list[str]:
    """What the site answers for: its names, else its bind address (a certificate for the IP)."""
    if proxy.names:
        return [f"https://{host_port(name, proxy.port)}" for name in proxy.names]
    if _unspecified(proxy.bind):
        raise UsageError(
            f"the proxy binds {proxy.bind} and declares no names: a TLS certificate needs "
            "the name or address clients use",
            where="proxy.names",
            hint="list the DNS names clients use (names: [ai.home.arpa]), or bind the "
            "proxy to the host's LAN address",
        )
    return [f"https://{host_port(proxy.bind, proxy.port)}"]


def _global_options(proxy: Proxy) -> Block:
    body: list[Block | str] = [
        "admin off",  # no admin endpoint to reach: stopped by pid, configured by file
        "persist_config off",
        "skip_install_trust",  # never write the local CA into the system trust store
    ]
    if not _unspecified(proxy.bind):
        body.append(_line("default_bind", proxy.bind))
    if proxy.tls == "internal":
        body.append("auto_https disable_redirects")  # no listener on port 80
    if proxy.acme_email is not None:
        body.append(_line("email", proxy.acme_email))
    if proxy.acme_ca is not None:
        body.append(_line("acme_ca", proxy.acme_ca))
    timeouts = Block(
        "timeouts",
        [
            _line("read_header", READ_HEADER_TIMEOUT),
            _line("read_body", READ_BODY_TIMEOUT),
            _line("idle", IDLE_TIMEOUT),
        ],  # no write timeout: a long generation streams for minutes
    )
    body.append(Block("servers", [timeouts]))
    return Block("", body)


def _reverse_proxy(
    head: list[str],
    upstream: str,
    health: str,
    timeout_s: float,
    key: str | None = None,
    keepalive: str = UPSTREAM_KEEPALIVE,
) -> Block:
    # An upstream beyond loopback requires its own key (L-58): the client's (the proxy's)
    # is replaced by it, read from Caddy's environment at run time.
    auth = [] if key is None else [_line("header_up", "Authorization", Placeholder(key, "Bearer "))]
    return Block(
        _line("reverse_proxy", *head, upstream),
        [
            *auth,
            "flush_interval -1",  # stream every chunk (SSE) as it comes
            Block(
                "transport http",
                [
                    _line("dial_timeout", DIAL_TIMEOUT),
                    _line("response_header_timeout", _duration(timeout_s)),
                    _line("keepalive", keepalive),
                ],
            ),
            _line("health_uri", health),
            _line("health_interval", HEALTH_INTERVAL),
            _line("health_timeout", HEALTH_TIMEOUT),
            "health_status 2xx",
        ],
    )


def _bearer(proxy: Proxy) -> list[Block | str]:
    matcher = Block(
        "@unauthorized",
        [
            Block(
                "not",
                [
                    _line("header", "Authorization", Placeholder(name, "Bearer ")),
                    # An unset variable is empty: "Bearer " must never be a key.
                    f'expression `{Placeholder(name)} != ""`',
                ],
            )
            for name in proxy.key_names
        ],
    )
    return [
        matcher,
        _line("header", "@unauthorized", "WWW-Authenticate", 'Bearer realm="inferfleet"'),
        f"respond @unauthorized `{UNAUTHORIZED}` 401",
    ]


def _forward_auth(proxy: Proxy) -> list[Block | str]:
    assert proxy.forward_auth is not None  # the model requires it with auth: forward_auth
    outpost = proxy.outpost or outpost_of(proxy.forward_auth)
    assert outpost is not None  # the model requires one or the other
    parts = urlsplit(proxy.forward_auth)
    upstream = f"{parts.scheme}://{parts.netloc}"
    uri = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = COPY_HEADERS[outpost]
    found: list[Block | str] = [
        # A client's own identity headers never reach the upstream (copied ones only).
        *(_line("request_header", f"-{name}") for name in headers),
    ]
    if outpost == "authentik":
        found.append(_line("reverse_proxy", AUTHENTIK_OUTPOST_PATH, upstream))
    found.append(
        Block(
            _line("forward_auth", upstream),
            [_line("uri", uri), _line("copy_headers", *headers)],
        )
    )
    return found


def _routes(fleet: Fleet, proxy: Proxy) -> list[Block | str]:
    routes: list[Block | str] = []
    gateway = fleet.gateway
    for name in proxy.services:
        service = fleet.services[name]
        if gateway is not None and name == "v1":
            raise UsageError(
                "proxy.services has a service named 'v1': its path /v1/ is the gateway's",
                where="proxy.services",
                hint="rename the service, or reach it through the gateway",
            )
        timeout = gateway.timeouts.get(name, gateway.timeout) if gateway else DEFAULT_TIMEOUT_S
        # The proxy is a process on its host (never in a container network): its host's
        # loopback is its own (dial_address, L-57).
        upstream = dial_address(
            fleet, service.host, service.bind, service.port, from_host=proxy.host
        )
        key = front_variable(name) if keyed(fleet, name) else None
        inner = _reverse_proxy([], upstream, service.health.path, timeout, key)
        routes.append(Block(_line("handle_path", f"/{name}/*"), [inner]))
    if gateway is not None:
        timeout = max([gateway.timeout, *gateway.timeouts.values()])
        upstream = dial_address(
            fleet, gateway.host, gateway.bind, gateway.port, from_host=proxy.host
        )
        routes.append(
            _reverse_proxy([], upstream, GATEWAY_HEALTH_PATH, timeout, keepalive=GATEWAY_KEEPALIVE)
        )
    else:
        routes.append(f"respond `{NOT_ROUTED}` 404")
    return routes


def caddyfile(fleet: Fleet, host: str) -> str:
    """The Caddyfile of the auth proxy on ``host`` (UsageError when it runs elsewhere)."""
    proxy = fleet.proxy
    if proxy is None or proxy.host != host:
        raise UsageError(
            f"no auth proxy runs on host {host!r}",
            where="proxy.host",
            hint=f"the proxy runs on {proxy.host!r}" if proxy else "declare proxy: first",
        )
    auth = _bearer(proxy) if proxy.auth == "bearer" else _forward_auth(proxy)
    # acme is Caddy's default for a site with names: no tls directive needed.
    tls: list[Block | str] = ["tls internal"] if proxy.tls == "internal" else []
    site = Block(
        ", ".join(_site_addresses(proxy)),
        [
            *tls,
            Block("request_body", [_line("max_size", MAX_BODY)]),
            # In a route, directives run in the order written: auth, then the routes.
            Block(
                "route", [_line("respond", HEALTH_PATH, "ok", "200"), *auth, *_routes(fleet, proxy)]
            ),  # fmt: skip
        ],
    )
    header = [
        f"# Rendered by inferfleet from the fleet file: the auth proxy on host {host}.",
        "# Keys come from the environment at run time ({env.NAME}); none is written here.",
    ]
    return "\n".join([*header, *_global_options(proxy).lines(), "", *site.lines()]) + "\n"


def key_names(fleet: Fleet) -> Iterable[str]:
    """The variables of ``keys_env`` the rendered Caddyfile reads, in order: the keys
    clients send (bearer auth), then each routed upstream's own key."""
    proxy = fleet.proxy
    if proxy is None:
        return ()
    clients = tuple(proxy.key_names) if proxy.auth == "bearer" else ()
    return clients + upstream_key_names(fleet)


def upstream_key_names(fleet: Fleet) -> tuple[str, ...]:
    """The variables holding the keys of the routed services beyond loopback (L-58)."""
    proxy = fleet.proxy
    if proxy is None:
        return ()
    return tuple(front_variable(n) for n in proxy.services if keyed(fleet, n))
