"""The front door's launch: what runs for the gateway (LiteLLM) or the auth proxy (Caddy).

One shape for both, the services' own (:class:`~inferfleet.render.pipeline.ServiceLaunch`):
argv, environment, the files installed for it (its config, its unit or Quadlet
file), where it listens and answers health, and one digest over all of it.
The deploy takes it through the services' state decision, actions and
executor (:mod:`inferfleet.deploy.frontdoor`), so a front door is kept,
restarted or moved between backends exactly as a service is.

What a front door has that a service does not: its keys. They live in an
untracked mode-600 env file (L-55): a unit reads it itself
(``EnvironmentFile=``), a process gets the values in its environment from
the deploy. They never reach a file inferfleet writes (L-54); a digest of
them is part of the spec, so a changed key restarts the process, and a unit
gets the same digest as a file of its own (:data:`KEYS_KIND`), so a changed
key restarts the unit too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, TypeAlias

from inferfleet.errors import UsageError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render.facts import HostFacts
from inferfleet.render.launch import CONTAINER_LABEL, Mount
from inferfleet.render.launch_parts import InstallFile, UnitParts, launch_digest, passed_from_caller
from inferfleet.render.unitfile import UnitFile, command_line, escape_value

if TYPE_CHECKING:
    from inferfleet.render.pipeline import ServiceLaunch

DIGEST_VERSION: Final = 3
STOP_GRACE_S: Final = 10.0
# The file beside a unit that holds the digest of its keys (never the keys): installed like
# the unit, so a changed key changes a file and the unit is restarted.
KEYS_KIND: Final = "keys-digest"
PRIVILEGED_PORT: Final = 1024


@dataclass(frozen=True)
class FrontLaunch(UnitParts):
    """What runs for one front-door part on its host, and the one digest of it."""

    name: str  # gateway | proxy: its record, unit (inferfleet-NAME) and log are filed under it
    host: str
    bind: str
    port: int
    backend: str  # process | systemd | quadlet
    scope: str  # system | user (units)
    argv: list[str]
    env: dict[str, str]  # besides its keys, which the backend adds at start
    keys_env: str | None  # the untracked key file a unit reads (absolute, on the host)
    url: str  # what clients use
    health_path: str
    health_timeout: float
    health_scheme: str = "http"  # https: the proxy answers its own health over TLS
    # https: the name its certificate is for, and the root the gate trusts (Caddy's local CA
    # under tls internal; None: the system's CAs).
    tls_name: str = ""
    tls_root: str | None = None
    files: list[InstallFile] = field(default_factory=list)
    image: str | None = None  # quadlet: the engine's image, by digest
    # quadlet: "uid:gid" the container's process runs as (a rootful container whose files
    # the deploying user reads: Caddy's local CA); None: the image's own user.
    user: str | None = None
    make_dirs: list[str] = field(default_factory=list)  # made before it starts (mode 700)
    engine: str = ""  # "litellm 1.106.12", "caddy v2.11.7": the record's runtime version
    # The key file's values (only ever to the process's environment); their digest is in
    # ``spec``. Not compared or printed.
    keys: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    container: None = None  # never a process-backend container (the services' shape)

    @property
    def unit(self) -> str:
        return f"inferfleet-{self.name}"

    def file(self, kind: str) -> InstallFile:
        return next(f for f in self.files if f.kind == kind)

    @property
    def health_url(self) -> str:
        return url_for(self.bind, self.port, self.health_path, scheme=self.health_scheme)

    @property
    def marked(self) -> bool:
        """No marker: a front door follows the fleet at every run, it has no revision of
        its own to roll back to."""
        return False

    @property
    def keys_digest(self) -> str:
        return keys_digest(self.keys)

    @property
    def spec(self) -> str:
        """argv, env, files, health and the keys' digest: a change of any restarts it."""
        return launch_digest(
            DIGEST_VERSION, self.argv, self.env, self.files, self.health_path,
            keys=self.keys_digest,
        )  # fmt: skip

    def process_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """A process's environment: what any program needs from the caller, its keys, its own."""
        env = {k: v for k, v in base.items() if passed_from_caller(k)}
        env.update(self.keys)
        env.update(self.env)
        return env


def keys_digest(values: Mapping[str, str]) -> str:
    """A digest of the keys (a changed key restarts the process); never the keys themselves."""
    text = "\n".join(f"{k}={v}" for k, v in sorted(values.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def relabels(fleet: Fleet, host: str) -> bool:
    """Whether ``host``'s bind mounts carry the shared SELinux label (its ``selinux``)."""
    spec = fleet.hosts.get(host)
    return spec is not None and spec.selinux


def with_units(
    launch: FrontLaunch,
    facts: HostFacts,
    *,
    description: str,
    volumes: list[Mount],
    relabel: bool = False,
) -> FrontLaunch:
    """The launch with its unit (systemd) or Quadlet file; a process-backend launch is
    returned as it is. ``relabel``: the host enforces SELinux (its ``selinux``)."""
    if launch.backend == "process":
        return launch
    if launch.backend == "systemd":
        unit = InstallFile(
            unit_path(facts, launch.scope, launch.unit),
            systemd_unit(launch, facts, description).text(),
            "systemd",
        )
    else:
        unit = InstallFile(
            f"{quadlet_dir(facts, launch.scope)}/{launch.unit}.container",
            quadlet_unit(launch, description, volumes, relabel).text(),
            "quadlet",
        )
    return replace(launch, files=[*launch.files, unit])


def with_keys(launch: FrontLaunch, keys: Mapping[str, str], facts: HostFacts) -> FrontLaunch:
    """The launch as deployed: its keys' values for a process's environment, and for a unit
    the keys' digest as a file beside its config (:data:`KEYS_KIND`), so that a changed key
    changes an installed file and the unit is restarted."""
    launch = replace(launch, keys=dict(keys))
    if launch.backend == "process":
        return launch
    digest = InstallFile(
        f"{facts.config_dir(launch.scope)}/{launch.name}/keys.sha256",
        launch.keys_digest + "\n",
        KEYS_KIND,
    )
    return replace(launch, files=[*launch.files, digest])


def deploying_user(facts: HostFacts, *, where: str) -> str:
    """``uid:gid`` of the deploying user (host facts), for a container's ``User=``."""
    if not (facts.uid.isascii() and facts.uid.isdigit() and facts.gid.isascii()
            and facts.gid.isdigit()):  # fmt: skip
        raise UsageError(
            f"the deploying user's uid and gid are not known (facts: uid {facts.uid!r}, "
            f"gid {facts.gid!r}): the container of {where} runs as that user",
            where=where,
            hint="deploy it on its host (apply reads them there), or give numeric uid and gid "
            "in the host's --facts",
        )
    return f"{facts.uid}:{facts.gid}"


def unit_path(facts: HostFacts, scope: str, unit: str) -> str:
    if scope == "system":
        return f"/etc/systemd/system/{unit}.service"
    return f"{facts.home}/.config/systemd/user/{unit}.service"


def quadlet_dir(facts: HostFacts, scope: str) -> str:
    if scope == "system":
        return "/etc/containers/systemd"
    return f"{facts.home}/.config/containers/systemd"


def systemd_unit(launch: FrontLaunch, facts: HostFacts, description: str) -> UnitFile:
    """A front door's systemd unit: its keys from the env file (L-06, L-55), restarted always
    and never given up on (L-38), enabled at boot."""
    unit = UnitFile()
    unit.add("Unit", "Description", escape_value(description))
    unit.add("Unit", "After", "network-online.target")
    unit.add("Unit", "Wants", "network-online.target")
    unit.add("Unit", "StartLimitIntervalSec", 0)  # never give up restarting (L-38)
    unit.add("Service", "Type", "exec")
    if launch.scope == "system":
        unit.add("Service", "User", facts.user)
        if launch.port < PRIVILEGED_PORT:
            # Caddy on 443 as the deploying user: the one capability it needs, nothing more.
            unit.add("Service", "AmbientCapabilities", "CAP_NET_BIND_SERVICE")
    for key, value in launch.env.items():
        unit.add("Service", "Environment", escape_value(f"{key}={value}"))
    if launch.keys_env is not None:
        # Required (no "-"): without its keys it would start open or not at all.
        unit.add("Service", "EnvironmentFile", escape_value(launch.keys_env))
    unit.add("Service", "ExecStart", command_line(launch.argv))
    unit.add("Service", "Restart", "always")
    unit.add("Service", "RestartSec", "5s")
    unit.add("Service", "TimeoutStartSec", f"{launch.health_timeout + 60:g}s")
    unit.add("Service", "TimeoutStopSec", f"{STOP_GRACE_S + 15:g}s")
    unit.add("Service", "LimitNOFILE", 65536)
    target = "multi-user.target" if launch.scope == "system" else "default.target"
    unit.add("Install", "WantedBy", target)
    return unit


def quadlet_unit(
    launch: FrontLaunch, description: str, volumes: list[Mount], relabel: bool = False
) -> UnitFile:
    """A Quadlet ``.container``: the engine's image by digest (L-42) on the host's network, so
    it binds the front door's address itself and reaches loopback services as the process
    does; ``volumes`` mounted; the keys from the env file (L-55); a fixed container name that
    Quadlet replaces (L-36), labelled as the part's, so the health gate and status accept its
    processes as its own (L-33); restarted always and enabled at boot (L-38)."""
    assert launch.image is not None
    unit = UnitFile()
    unit.add("Unit", "Description", escape_value(description))
    unit.add("Unit", "StartLimitIntervalSec", 0)
    c = "Container"
    unit.add(c, "ContainerName", launch.unit)
    unit.add(c, "Image", launch.image)
    unit.add(c, "Label", f"{CONTAINER_LABEL}={launch.name}")
    unit.add(c, "Pull", "missing")
    unit.add(c, "Exec", command_line(launch.argv))
    unit.add(c, "Network", "host")
    if launch.user is not None:
        unit.add(c, "User", launch.user)
        if launch.port < PRIVILEGED_PORT:
            # Port 443 as that user: the one capability it needs (podman gives a capability
            # it adds to a non-root user's process as an ambient one).
            unit.add(c, "AddCapability", "CAP_NET_BIND_SERVICE")
    for volume in volumes:
        unit.add(c, "Volume", escape_value(volume.spec(relabel)))
    for key, value in launch.env.items():
        unit.add(c, "Environment", command_line([f"{key}={value}"]))
    if launch.keys_env is not None:
        unit.add(c, "EnvironmentFile", escape_value(launch.keys_env))
    unit.add(c, "StopTimeout", f"{STOP_GRACE_S:g}")
    unit.add("Service", "Restart", "always")
    unit.add("Service", "RestartSec", "5s")
    unit.add("Service", "TimeoutStartSec", f"{launch.health_timeout + 60:g}s")
    unit.add("Service", "TimeoutStopSec", f"{STOP_GRACE_S + 15:g}s")
    target = "multi-user.target" if launch.scope == "system" else "default.target"
    unit.add("Install", "WantedBy", target)
    return unit


# What runs on a host: a service, or a front door (the gateway, the auth proxy). The
# deploy's state decision, actions and executor take either.
Launch: TypeAlias = "ServiceLaunch | FrontLaunch"
