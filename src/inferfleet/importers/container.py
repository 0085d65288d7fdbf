"""A containerised llama-server (a Quadlet ``.container``, a compose service) into a service.

What the container runs is the image's entrypoint (or ``Entrypoint=`` /
``entrypoint:``) followed by its arguments. llama.cpp's server images
(``ghcr.io/ggml-org/llama.cpp:server*``) start ``/app/llama-server``; any
other image needs its entrypoint written out. The model path inside the
container is mapped back through the volumes to the host file (whose size
the model block records); the fleet then mounts the model folder at its own
place (``/models/NAME``), a difference the argv comparison explains. The
published port is the service's port, on its address (loopback unless the
fleet states why, L-58); devices and the user carry over.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, TypeVar

from inferfleet.fleetfile.base import pinned_image
from inferfleet.fleetfile.fleet import Host
from inferfleet.importers import commandline
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.service import EnvItem, Source, read_service

LLAMA_CPP_ENTRYPOINT = "/app/llama-server"
# vLLM's official image starts `vllm serve` (its Dockerfile's ENTRYPOINT).
VLLM_ENTRYPOINT = ("vllm", "serve")
_PATH_FLAGS = {"-m", "--model", "--model-path", "--mmproj", "-mm", "--chat-template-file"}
_LOOPBACK = "127.0.0.1"
Published = tuple[str | None, int, int]  # ip, host port, port inside
T = TypeVar("T")


@dataclass(frozen=True)
class Volume:
    host: str
    container: str
    read_only: bool


@dataclass
class ContainerSpec:
    name: str
    where: Where
    image: str
    args: list[str]
    entrypoint: list[str] | None = None
    env: list[EnvItem] = field(default_factory=list)
    env_file: str | None = None
    volumes: list[Volume] = field(default_factory=list)
    publish: list[Published] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    user: str | None = None
    host_network: bool = False
    shm_size: str | None = None  # podman's and compose's SIZE: 16g, 512m, bytes


def take_entry(
    found: T | None, into: list[T], left_out: Callable[[Where, str], None], at: Where, why: str
) -> None:
    """A volume or published port of the container as read, or ``why`` not (a note or a
    problem, by what leaving it out changes)."""
    if found is None:
        left_out(at, why)
    else:
        into.append(found)


def entrypoint_of(spec: ContainerSpec) -> list[str] | None:
    if spec.entrypoint:
        return spec.entrypoint
    repo = spec.image.split("@", 1)[0].rsplit(":", 1)[0]
    if repo.endswith("ggml-org/llama.cpp") or repo.endswith("ggerganov/llama.cpp"):
        return [LLAMA_CPP_ENTRYPOINT]
    if repo.endswith("vllm/vllm-openai"):
        return list(VLLM_ENTRYPOINT)
    return None


def _on_host(path: str, volumes: list[Volume]) -> tuple[str, Volume] | None:
    """The host path of a path inside the container, through the longest matching volume."""
    inside = PurePosixPath(path)
    best: Volume | None = None
    for volume in volumes:
        mount = PurePosixPath(volume.container)
        if (inside == mount or mount in inside.parents) and (
            best is None or len(volume.container) > len(best.container)
        ):
            best = volume
    if best is None:
        return None
    rest = inside.relative_to(best.container)
    return str(PurePosixPath(best.host) / rest), best


def read_container(
    out: Imported, spec: ContainerSpec, *, host_name: str, host: Host | None
) -> None:
    where = spec.where
    program = entrypoint_of(spec)
    if program is None and commandline.identify(spec.args) is not None:
        program = []  # an image without an entrypoint of its own: the command is the server
    if program is None:
        out.problem(
            where,
            f"{spec.name}: cannot tell which server image {spec.image} runs",
            "give its entrypoint (Entrypoint= / entrypoint:); llama.cpp's server images are known",
        )
        return
    original = [*program, *spec.args]
    words = list(original)
    used: list[Volume] = []
    model_at = len(program) if list(program) == list(VLLM_ENTRYPOINT) else None
    for i in range(max(len(program) - 1, 0), len(words)):
        at_model = i == model_at and words[i].startswith("/")
        flagged = i + 1 < len(words) and words[i] in _PATH_FLAGS and words[i + 1].startswith("/")
        if at_model:
            found = _on_host(words[i], spec.volumes)
            if found is None:
                out.problem(where, f"{spec.name}: model {words[i]} is in no volume")
                return
            words[i], volume = found
            used.append(volume)
        elif flagged:
            found = _on_host(words[i + 1], spec.volumes)
            if found is None:
                out.problem(
                    where,
                    f"{spec.name}: {words[i]} {words[i + 1]} is in no volume of the container",
                    "mount the model's folder from the host",
                )
                return
            words[i + 1], volume = found
            used.append(volume)
    source = Source(
        spec.name, words, where, env=spec.env, image=spec.image, secrets_file=spec.env_file
    )
    service = read_service(out, source, host_name=host_name, host=host)
    if service is None:
        return
    service.original = original
    block, ex = service.block, service.explained
    block["backend"] = "quadlet"
    inside_port = block.pop("port")
    container: dict[str, Any] = {}
    bind = block.pop("bind", None)
    if spec.host_network:
        container["network"] = "host"
        block["port"] = inside_port
        if bind is not None:
            block["bind"] = bind
    else:
        outside = _published(spec, inside_port, out)
        if outside is not None:
            block["port"] = outside
            if outside != inside_port:
                container["port"] = inside_port
        ex["--host"] = "inside the container: every address; published on the bind"
    for flag in ("--model", "--mmproj", "--chat-template-file"):  # --model-path is --model
        ex[flag] = "the fleet mounts the file's folder at its own place (/models/...)"
    if spec.devices:
        container["devices"] = spec.devices
    if spec.user is not None:
        container["user"] = spec.user
    if spec.shm_size is not None:
        size = shm_size(spec.shm_size)
        if size is None:
            out.problem(where, f"{spec.name}: shm size {spec.shm_size!r} is not a size")
        else:
            container["shm_size"] = size
    other = [v for v in spec.volumes if v not in used]
    if other:
        container["volumes"] = [
            {
                "host": v.host,
                "container": v.container,
                **({"read_only": True} if v.read_only else {}),
            }
            for v in other
        ]
    if container:
        block["container"] = container
    if not pinned_image(spec.image):
        out.note(where, f"{spec.name}: image {spec.image} is not pinned by digest (L-42): pin it")
    out.services[spec.name] = service


def _published(spec: ContainerSpec, inside_port: int, out: Imported) -> int | None:
    """The host port that publishes the server's port; None (a problem) when none does."""
    match = [p for p in spec.publish if p[2] == inside_port]
    if not match:
        out.problem(
            spec.where,
            f"{spec.name}: the server's port {inside_port} is not published",
            f"publish it (PublishPort= / ports:), e.g. 127.0.0.1:{inside_port}:{inside_port}",
        )
        return None
    ip, outside, _ = match[0]
    if ip != _LOOPBACK:
        out.note(
            spec.where,
            f"{spec.name}: published on {ip or 'every address'}; the fleet publishes on "
            f"{_LOOPBACK} unless the service's exposure says why (L-58)",
        )
    return outside


_SIZE = re.compile(r"^(\d+)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
_UNITS = {"": "", "k": "KiB", "m": "MiB", "g": "GiB", "t": "TiB"}


def shm_size(text: str) -> str | None:
    """podman's and compose's size (``16g``, binary units) as the fleet writes one (16GiB)."""
    match = _SIZE.match(text.strip())
    if match is None:
        return None
    return match[1] + _UNITS[match[2].lower()]


def parse_publish(text: str) -> Published | None:
    """``[IP:]HOST:CONTAINER[/tcp]`` or ``CONTAINER`` (podman and compose short syntax)."""
    text = text.split("/", 1)[0]
    ip: str | None = None
    if text.startswith("["):
        end = text.find("]")
        ip, text = text[1:end], text[end + 2 :]
    parts = text.split(":")
    try:
        if len(parts) == 3:
            ip = ip or parts[0] or None
            return ip, int(parts[1]), int(parts[2])
        if len(parts) == 2:
            return ip, int(parts[0]), int(parts[1])
        if len(parts) == 1:
            return ip, int(parts[0]), int(parts[0])
    except ValueError:
        return None
    return None


def parse_volume(text: str) -> Volume | None:
    parts = text.split(":")
    if len(parts) < 2 or not parts[0].startswith(("/", "~")):
        return None  # a named volume: no host path to read a model from
    return Volume(parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(","))
