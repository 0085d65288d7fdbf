"""The services section of the fleet file: what runs where, and how."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from inferfleet.fleetfile.base import (
    MAX_COUNT,
    MAX_TOKENS,
    Argument,
    CacheType,
    ContainerUser,
    EnvName,
    EnvValue,
    FiniteFloat,
    HealthPath,
    Modality,
    Name,
    RepoPath,
    SpecType,
    Strict,
    Text,
    UserName,
)
from inferfleet.fleetfile.exposure import Bind, Exposure, ExposureField, url_for
from inferfleet.fleetfile.quantities import ByteSize, Duration
from inferfleet.fleetfile.rpc import RpcWorker

# ---------------------------------------------------------------- services


class KvCache(Strict):
    k: CacheType = "f16"
    v: CacheType = "f16"


class Health(Strict):
    path: HealthPath = "/health"
    """HTTP path answering 200 when ready, 503 loading."""
    timeout: Duration = 600.0
    """How long a load may take before the gate fails (L-34)."""


class ClientFacts(Strict):
    max_tokens: int = Field(1024, ge=1, le=MAX_TOKENS)
    """Largest completion a client may ask for."""
    input: list[Modality] = Field(default_factory=lambda: list[Modality](["text"]))
    reasoning_field: Literal["reasoning_content", "reasoning"] | None = None
    """Where the server puts reasoning text (L-45)."""
    tools: bool = False
    """Clients call tools on this endpoint (needs --jinja)."""
    chat: bool = True
    """Clients send chat requests (the model needs a chat template, L-19)."""
    compaction_threshold: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """Prompt tokens at which clients compact the conversation; with max_tokens it must fit the
    per-slot window (L-26). Default: window - max_tokens."""
    reasoning_effort: dict[Text, Text] = Field(default_factory=dict)
    """reasoning_effort a client may send -> value the template accepts (L-46)."""


class TensorOverride(Strict):
    pattern: Text
    """Regular expression searched in tensor names."""
    device: Text = "CPU"
    """CPU, or a device of the host. The server takes ONE joined list, first match wins (L-17)."""


class Speculative(Strict):
    """Speculative decoding flags, which only work as a set (L-13)."""

    types: list[SpecType] = Field(default_factory=list)
    """Spec types; at most one context-backed draft-* type per process (L-14)."""
    draft_model: Name | None = None
    """A model of this fleet used as drafter."""
    draft_device: Name | None = None
    """The one host device the drafter runs on (L-16)."""
    draft_max: int | None = Field(None, ge=1, le=MAX_COUNT)
    """Tokens drafted per step."""
    draft_min: int | None = Field(None, ge=0, le=MAX_COUNT)
    """Fewest draft tokens to use."""
    draft_p_min: float | None = Field(None, ge=0, le=1)
    """Minimum draft probability."""
    draft_kv_cache: KvCache | None = None
    """Drafter K/V cache types."""

    @property
    def draft_params_set(self) -> list[str]:
        """Names of the draft-* tunables given (leftovers without a drafter crash, L-13)."""
        fields = ("draft_max", "draft_min", "draft_p_min", "draft_kv_cache", "draft_device")
        return [f for f in fields if getattr(self, f) is not None]


def splits_a_mount(path: str) -> bool:
    """podman reads a mount as host:container[:options]; a ':' or ',' inside a path would
    shift the fields and mount something else."""
    return ":" in path or "," in path


class Volume(Strict):
    host: Text
    """Path on the host (absolute or ~/...)."""
    container: Text
    """Absolute path inside the container."""
    read_only: bool = False

    @field_validator("host", "container")
    @classmethod
    def _no_separator(cls, value: str) -> str:
        if splits_a_mount(value):
            raise ValueError(f"a volume path cannot contain ':' or ',' ({value!r})")
        return value

    @field_validator("container")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"a container path must be absolute, not {value!r}")
        return value


class ContainerOpts(Strict):
    volumes: list[Volume] = Field(default_factory=list)
    """Extra bind mounts."""
    cache: Text | None = None
    """Host dir mounted at /cache for compile and download caches (L-37); default: the host's
    inferfleet cache / containers / SERVICE."""
    home: Text | None = None
    """HOME inside the container; must be writable (L-39). Default for llm services: /cache/home."""
    devices: list[Text] | None = None
    """Devices to add (/dev/kfd, nvidia.com/gpu=0); default from the host."""
    network: Literal["bridge", "host"] = "bridge"
    port: int | None = Field(None, ge=1, le=65535)
    """Port inside the container; default: the service port."""
    user: ContainerUser | None = None
    """User inside the container."""
    shm_size: ByteSize | None = None
    """/dev/shm size (tensor parallel)."""
    health_cmd: Text | None = None
    """Health command; default for llm services: curl the health path."""
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    """Environment of the container (no secrets)."""


class UnitOpts(Strict):
    scope: Literal["system", "user"] = "system"
    """System unit, or user unit (needs linger, L-38)."""
    user: UserName | None = None
    """User= of a system unit; default: the ssh user."""
    restart: Literal["always", "on-failure", "no"] = "always"
    restart_sec: Duration = 5.0
    """Pause between restarts."""
    stop_timeout: Duration = 30.0
    """TimeoutStopSec; kept above the engine's own stop grace."""


class SettingsFile(Strict):
    """A third-party config file rendered at deploy time from env files (L-54)."""

    template: RepoPath
    """Template with ${VAR} placeholders, relative to fleet.yaml."""
    dest: Text
    """Where the rendered file goes on the host (outside the repo)."""
    allow: list[EnvName]
    """The only variable names the template may use."""
    env_files: list[Text] = Field(default_factory=list)
    """Untracked env files on the host holding the values."""


def _flash_attn(value: Any) -> Any:
    # YAML 1.1 reads a bare `on`/`off` as a boolean.
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


class Service(Strict):
    host: Name
    kind: Literal["llm", "container"] = "llm"
    runtime: Name | None = None
    model: Name | None = None
    alias: Text | None = None
    """Model id clients use; default: service name."""
    group: Name | None = None
    """Swap group (groups:) whose one llama-server router serves this model."""
    image: Text | None = None
    """Container image (kind: container), by digest."""
    bind: Bind = "127.0.0.1"
    """Address the server listens on; beyond loopback only with an exposure that allows it (L-58).
    """
    port: int = Field(ge=1, le=65535)
    exposure: ExposureField = Field(default_factory=Exposure)
    """Who may reach it: loopback (default), lan (with a reason) or public (behind the auth proxy)
    (L-58)."""
    ctx_per_slot: int | None = Field(None, ge=256, le=MAX_TOKENS)
    """Context window of ONE slot: the client contract (L-25)."""
    parallel: int = Field(1, ge=1, le=256)
    """Slots; total context = per slot x slots."""
    kv_cache: KvCache = Field(default_factory=KvCache)
    flash_attn: Literal["on", "off", "auto"] = "auto"
    """Flash attention."""
    devices: list[Name] = Field(default_factory=list)
    """Host devices to run on."""
    backend: Literal["process", "systemd", "quadlet"] = "process"
    health: Health = Field(default_factory=Health)
    extra_args: list[Argument] = Field(default_factory=list)
    """Appended to the argv."""
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    """Tunables (no secrets)."""
    client: ClientFacts = Field(default_factory=ClientFacts)
    paths: list[Text] = Field(default_factory=list)
    """Repo paths this service owns (deploy planning)."""
    split_mode: Literal["none", "layer", "row", "tensor"] | None = None
    """llama.cpp multi-device split; default: the server's (layer)."""
    tensor_split: list[Annotated[FiniteFloat, Field(ge=0)]] = Field(default_factory=list)
    """Share of the model per device, in devices order."""
    tensor_overrides: list[TensorOverride] = Field(default_factory=list)
    """Tensor placement, first match wins (L-17)."""
    speculative: Speculative | None = None
    """Speculative decoding (L-13)."""
    mmproj: Text | None = None
    """Vision projector, a file of the service's model (L-22)."""
    chat_template_file: RepoPath | None = None
    """Chat template file relative to fleet.yaml (L-19)."""
    chat_template_kwargs: dict[Text, Any] = Field(default_factory=dict)
    """Template kwargs (need jinja, L-18)."""
    jinja: bool | None = None
    """Jinja templates; default on when tools or template kwargs are used."""
    metrics: bool | None = None
    """Serve /metrics; default on for llm services (L-56)."""
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    """vLLM/SGLang share of device memory (L-32: below 1.0)."""
    tensor_parallel: int | None = Field(None, ge=1, le=MAX_COUNT)
    """vLLM/SGLang tensor parallel size; default: GPU devices."""
    reasoning_parser: Text | None = None
    """vLLM/SGLang reasoning parser."""
    tool_parser: Text | None = None
    """vLLM/SGLang tool call parser."""
    container: ContainerOpts = Field(default_factory=ContainerOpts)
    rpc: list[RpcWorker] = Field(default_factory=list)
    """llama.cpp RPC workers on other hosts that hold part of the model (--rpc); the split follows
    the devices' memory."""
    unit: UnitOpts = Field(default_factory=UnitOpts)
    runtime_env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    """Variables the runtime or GPU driver reads itself, set on purpose (HIP_VISIBLE_DEVICES); never
    tunables (L-24)."""
    secrets_env: Text | None = None
    """Untracked mode-600 env file on the host with secrets (L-06, L-55)."""
    settings: list[SettingsFile] = Field(default_factory=list)
    """Third-party settings rendered at deploy (L-54)."""

    @field_validator("flash_attn", mode="before")
    @classmethod
    def _fa_bool(cls, value: Any) -> Any:
        return _flash_attn(value)

    @model_validator(mode="after")
    def _by_kind(self) -> Service:
        if self.kind == "llm":
            missing = [f for f in ("runtime", "model", "ctx_per_slot") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"an llm service needs {', '.join(missing)}")
        elif self.image is None:
            raise ValueError("a container service needs image (pinned by digest)")
        if self.tensor_split and len(self.tensor_split) != len(self.devices):
            raise ValueError(
                f"tensor_split has {len(self.tensor_split)} shares for "
                f"{len(self.devices)} devices; give one share per device"
            )
        return self

    @property
    def metrics_on(self) -> bool:
        """Whether /metrics is served (llm services by default, L-56)."""
        return self.metrics if self.metrics is not None else self.kind == "llm"

    @property
    def drafter(self) -> str | None:
        """The model that drafts for this one (``speculative.draft_model``), if any."""
        return None if self.speculative is None else self.speculative.draft_model

    @property
    def models_loaded(self) -> list[str]:
        """The fleet's models this service loads: the served one, then its drafter."""
        return list(dict.fromkeys(m for m in (self.model, self.drafter) if m is not None))

    def model_id(self, name: str) -> str:
        """The model id clients send: the alias, else the service's name."""
        return self.alias or name

    def url(self, path: str = "") -> str:
        """Where this machine reaches the server (the probe target): its base URL, or
        ``path`` on it (a wildcard bind by its loopback)."""
        return url_for(self.bind, self.port, path)

    @property
    def ctx_total(self) -> int:
        """The pool the server allocates: per-slot window x slots (L-25)."""
        return (self.ctx_per_slot or 0) * self.parallel
