"""Podman facts and effects shared by every backend that runs containers.

- Identity (L-33): a container's server is not a descendant of the process
  that asked for it. ``podman run`` hands the container to ``conmon``, which
  detaches; the server is conmon's child, and with a published port conmon
  itself holds the host's socket. So the processes that may own the
  service's port are conmon and its descendants (``State.ConmonPid``) plus
  the container's own init and its descendants (``State.Pid``), and only for
  a container that carries this service's label: a stranger's container of
  the same name is not ours.
- A stale container (L-36): removed before a start only when it carries the
  service's label; one without it belongs to someone else and is refused.
- Image pins (L-42): the digest the fleet file pins must be the one podman
  holds locally (``podman image inspect``); a start never pulls.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass

from inferfleet.backends.ports import family_of
from inferfleet.errors import BackendError
from inferfleet.io.become import NO_BECOME, Become
from inferfleet.render.launch import CONTAINER_LABEL as LABEL

INSPECT_TIMEOUT = 60.0
REMOVE_TIMEOUT = 120.0
_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class Container:
    """What ``podman container inspect`` says about one container."""

    name: str
    pid: int  # the container's init in the host's pid namespace; 0 when not running
    conmon_pid: int
    status: str  # created | running | exited | ...
    exit_code: int
    label: str  # the value of LABEL; "" when it has none

    def owned_by(self, service: str) -> bool:
        return self.label == service


def present(podman: str) -> bool:
    """Whether the podman executable exists on this host."""
    if "/" in podman:
        return os.access(podman, os.X_OK)
    return shutil.which(podman) is not None


def missing_error(podman: str, where: str) -> BackendError:
    return BackendError(
        f"podman is not installed on this host ({podman} not found)",
        where=where,
        hint="install podman and runc (Debian/Ubuntu: apt-get install podman runc); "
        "`inferfleet doctor` lists what the host lacks. Nothing was stopped",
    )


def inspect(podman: str, name: str, become: Become = NO_BECOME) -> Container | None:
    """The container of this name, None when there is none."""
    done = become.run(
        [podman, "container", "inspect", "--format", "json", name], timeout=INSPECT_TIMEOUT
    )
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout)
        item = data[0]
        state = item.get("State") or {}
        labels = (item.get("Config") or {}).get("Labels") or {}
        return Container(
            name=name,
            pid=int(state.get("Pid") or 0),
            conmon_pid=int(state.get("ConmonPid") or 0),
            status=str(state.get("Status") or ""),
            exit_code=int(state.get("ExitCode") or 0),
            label=str(labels.get(LABEL, "")),
        )
    except (ValueError, TypeError, IndexError, KeyError, AttributeError):
        raise BackendError(
            f"podman container inspect {name} answered something that is not its JSON",
            hint=f"run `podman container inspect {name}` by hand to see what podman says",
        ) from None


def owner_pids(podman: str, name: str, service: str, become: Become = NO_BECOME) -> set[int]:
    """The processes that may hold the service's port: the labelled container's conmon,
    its init, and their descendants (L-33); empty when no such container runs."""
    found = inspect(podman, name, become)
    if found is None or not found.owned_by(service) or found.pid <= 0:
        return set()
    return family_of(found.conmon_pid) | family_of(found.pid)


def remove_stale(podman: str, name: str, service: str, become: Become = NO_BECOME) -> bool:
    """Remove a container of this name left by a crash (L-36), only when it is the service's.

    True when one was removed. A container of that name without the service's
    label is someone else's: refused, never removed.
    """
    found = inspect(podman, name, become)
    if found is None:
        return False
    if not found.owned_by(service):
        owner = f"label {LABEL}={found.label}" if found.label else f"no {LABEL} label"
        raise BackendError(
            f"a container named {name} exists ({found.status}) but is not service "
            f"{service}'s ({owner})",
            where=f"service {service}",
            hint=f"inferfleet never removes a container it did not start (L-43); inspect it "
            f"(podman inspect {name}), remove it by hand if it is yours, then run again",
        )
    done = become.run([podman, "rm", "--force", "--ignore", name], timeout=REMOVE_TIMEOUT)
    if done.returncode != 0:
        raise BackendError(
            f"cannot remove the stale container {name}: {(done.stderr or done.stdout).strip()}",
            where=f"service {service}",
            hint=f"remove it by hand (podman rm -f {name}) and run again",
        )
    return True


def pinned_digest(image: str) -> str | None:
    """``sha256:...`` of an image reference pinned by digest, None for a tag."""
    match = _DIGEST.search(image)
    return None if match is None else match.group(1)


def image_problem(podman: str, image: str, become: Become = NO_BECOME) -> str | None:
    """Why the image cannot be used on this host as pinned, None when it can (L-42).

    The digest in the reference must be among the digests podman holds for the
    image it finds locally (``Digest`` and ``RepoDigests``); a tag is taken as
    whatever the host has under it (``check`` flags it as not pinned).
    """
    done = become.run(
        [podman, "image", "inspect", "--format", "json", image], timeout=INSPECT_TIMEOUT
    )
    if done.returncode != 0:
        return f"image {image} is not in podman's local storage"
    wanted = pinned_digest(image)
    if wanted is None:
        return None
    try:
        item = json.loads(done.stdout)[0]
        digests = {str(item.get("Digest") or "")}
        digests |= {str(d).rpartition("@")[2] for d in item.get("RepoDigests") or []}
    except (ValueError, TypeError, IndexError, AttributeError):
        return f"podman image inspect {image} answered something that is not its JSON"
    if wanted not in digests:
        have = ", ".join(sorted(d for d in digests if d)) or "none"
        return f"the local image found for {image} has digest(s) {have}, not {wanted}"
    return None
