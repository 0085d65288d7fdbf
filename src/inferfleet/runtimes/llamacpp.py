"""llama.cpp adapter: a service becomes ``llama-server`` argv, as data.

The argv is a list, never a shell string. Lessons encoded here:

- L-25: ``-c`` is the pool; the per-slot window (the client contract) is
  ``ctx_per_slot``, so the pool is ``ctx_per_slot x parallel``. Unified KV is
  turned off explicitly so each slot really owns its share.
- L-56: ``--metrics`` is always on, so ``/metrics`` never answers 501 and the
  endpoint never silently drops out of monitoring.
- L-23: mmap stays on (we never pass ``--no-mmap``).
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.spec.models import Host, Service

# llama.cpp names its devices after the backend that drives them.
_DEVICE_PREFIX = {"nvidia": "CUDA", "amd": "ROCm", "intel": "SYCL"}


def serve_argv(
    service_name: str, service: Service, host: Host, binary: Path, model_path: Path
) -> list[str]:
    assert service.ctx_per_slot is not None  # guaranteed for llm services by the schema
    argv = [
        str(binary),
        "--model",
        str(model_path),
        "--alias",
        service.alias or service_name,
        "--host",
        service.bind,
        "--port",
        str(service.port),
        "--ctx-size",
        str(service.ctx_total),
        "--parallel",
        str(service.parallel),
        "--no-kv-unified",
        "--cache-type-k",
        service.kv_cache.k,
        "--cache-type-v",
        service.kv_cache.v,
        "--flash-attn",
        service.flash_attn,
        "--metrics",
    ]
    argv += _device_args(service, host)
    argv += service.extra_args
    return argv


def _device_args(service: Service, host: Host) -> list[str]:
    by_name = {d.name: (i, d) for i, d in enumerate(host.devices)}
    picked = [by_name[name] for name in service.devices if name in by_name]
    if not picked:
        return []
    gpus = [
        f"{_DEVICE_PREFIX[d.vendor]}{d.index if d.index is not None else i}"
        for i, d in picked
        if d.vendor in _DEVICE_PREFIX
    ]
    if not gpus:
        # CPU only: keep every layer off any accelerator the build may have.
        return ["--device", "none", "--n-gpu-layers", "0"]
    return ["--device", ",".join(gpus), "--n-gpu-layers", "999"]


def environment(service: Service, base: dict[str, str]) -> dict[str, str]:
    """The server's environment: the caller's, minus stray LLAMA_ARG_* overrides.

    llama-server reads every flag also from ``LLAMA_ARG_*`` variables; one
    left in an operator's shell would silently change a served config, so
    only the fleet file's own tunables get through.
    """
    env = {k: v for k, v in base.items() if not k.startswith("LLAMA_ARG_")}
    env.update(service.env)
    return env
