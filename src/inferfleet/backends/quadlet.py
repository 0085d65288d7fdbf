"""The ``quadlet`` backend: Podman containers run by systemd from a ``.container`` file.

The file (the renderer's) goes to ``/etc/containers/systemd`` or
``~/.config/containers/systemd``; ``daemon-reload`` runs Podman's generator,
which turns ``NAME.container`` into ``NAME.service``. Generated units cannot
be enabled: the file's own ``[Install]`` section makes them start at boot.
Before a start, a stale container holding the name is removed (L-35, L-36).
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.errors import BackendError
from inferfleet.io.become import NO_BECOME, Become

GENERATORS = (
    "/usr/lib/systemd/system-generators/podman-system-generator",
    "/usr/libexec/podman/quadlet",
)


def quadlet_dir(scope: str, home: str) -> Path:
    if scope == "system":
        return Path("/etc/containers/systemd")
    return Path(home) / ".config" / "containers" / "systemd"


def generator_present() -> bool:
    """Podman >= 4.4 ships the Quadlet generator (the rendered files need 5.0); without it
    nothing is generated."""
    return any(Path(p).exists() for p in GENERATORS)


def container_exists(podman: str, name: str, become: Become = NO_BECOME) -> bool:
    """Whether a container of this name exists (rootful through ``become`` for system scope)."""
    done = become.run([podman, "container", "exists", name], timeout=60)
    return done.returncode == 0


def remove_container(podman: str, name: str, become: Become = NO_BECOME) -> bool:
    """Remove a container of this name if one is left (L-36); True when one was removed."""
    if not container_exists(podman, name, become):
        return False
    done = become.run([podman, "rm", "--force", "--ignore", name], timeout=120)
    if done.returncode != 0:
        raise BackendError(
            f"cannot remove the stale container {name}: {(done.stderr or done.stdout).strip()}",
            hint=f"remove it by hand (podman rm -f {name}) and deploy again",
        )
    return True
