"""Rules for the export to Kubernetes (L-09, L-16, L-42), judged when the fleet declares
``kubernetes:``: the section is the target's declaration, so ``check`` (and ``render``,
which runs ``check``) judges the export exactly when a cluster is a target.
"""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.artifacts.manifest import declared_files
from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.errors import FleetError
from inferfleet.fleetfile.base import PIN_HINT, pinned_image
from inferfleet.fleetfile.kubernetes import KubernetesTarget
from inferfleet.fleetfile.quantities import format_size
from inferfleet.render.kube.devices import gpu_problem
from inferfleet.render.kube.models import fetchable, volume_size
from inferfleet.render.kube.workload import exported_models, exported_services


@rule("kube-gpu-request", "L-16", "error")
def gpu_request(ctx: CheckContext) -> Iterator[Hit]:
    """a service's devices cannot be expressed as Kubernetes GPU requests"""
    if ctx.fleet.kubernetes is None:
        return
    for name in exported_services(ctx.fleet):
        service = ctx.fleet.services[name]
        problem = gpu_problem(service, ctx.fleet.hosts[service.host])
        if problem is not None:
            yield Hit(
                name,
                f"services.{name}.devices",
                f"service {name!r} cannot be exported: {problem}",
                "run it on the host's first GPUs in order (a pod sees its GPUs from index 0) "
                "and of one vendor (nvidia.com/gpu, amd.com/gpu); or keep it on its host",
            )


@rule("kube-model-volume", "L-09", "error")
def model_volume(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """a model's volume is missing, too small for its declared files, or cannot be filled"""
    target = ctx.fleet.kubernetes
    if target is None:
        return
    for model in exported_models(ctx.fleet):
        problem = fetchable(ctx.fleet, model)
        if problem is not None:
            yield Hit(
                None,
                f"models.{model}.source",
                f"model {model!r} cannot be fetched into a volume: {problem}",
                "give it a hub source with a pinned revision (the init container runs "
                "`inferfleet models fetch`, L-01)",
            )
            continue
        yield from _volume_fits(ctx, target, model)


def _volume_fits(ctx: CheckContext, target: KubernetesTarget, model: str) -> Iterator[Hit | Skip]:
    size = volume_size(target, model)
    if size is None:
        yield Hit(
            None,
            "kubernetes.volumes",
            f"model {model!r} has no volume size for the cluster",
            f"set kubernetes.volumes.{model} (or kubernetes.volume_size) to hold its files",
        )
        return
    try:
        files = declared_files(ctx.fleet.models[model], ctx.root)
    except FleetError as exc:
        yield Skip(model, f"declared files of model {model!r} unreadable: {exc.message}")
        return
    needed = sum(f.size for f in files)
    if needed > size:
        where = (
            f"kubernetes.volumes.{model}" if model in target.volumes else "kubernetes.volume_size"
        )
        yield Hit(
            None,
            where,
            f"model {model!r} declares {format_size(needed)} in {len(files)} file(s), more "
            f"than its volume's {format_size(size)}: the fetch would fill it and fail",
            f"give the volume at least {format_size(needed)} (plus room to grow)",
        )


@rule("kube-image-not-pinned", "L-42", "error")
def image_pinned(ctx: CheckContext) -> Iterator[Hit]:
    """an image of the Kubernetes export is missing or not pinned by digest"""
    target = ctx.fleet.kubernetes
    if target is None:
        return
    named = [(f"kubernetes.images.{k}", v) for k, v in target.images.items()]
    named.append(("kubernetes.tools_image", target.tools_image))
    if target.gateway_image is not None:
        named.append(("kubernetes.gateway_image", target.gateway_image))
    elif ctx.fleet.gateway is not None:
        yield Hit(
            None,
            "kubernetes",
            "the fleet declares a gateway, but kubernetes.gateway_image names no LiteLLM image",
            "set kubernetes.gateway_image: the LiteLLM proxy image, by digest",
        )
    for where, image in named:
        if not pinned_image(image):
            yield Hit(
                None,
                where,
                f"{where} is {image!r}, not pinned by digest",
                PIN_HINT,
            )
    for name in exported_services(ctx.fleet):
        runtime = ctx.fleet.services[name].runtime or ""
        if ctx.fleet.runtimes[runtime].image is None and runtime not in target.images:
            yield Hit(
                name,
                f"services.{name}.runtime",
                f"service {name!r} runs runtime {runtime!r}, which has no image for the cluster",
                f"build an image from the runtime's pinned source and set "
                f"kubernetes.images.{runtime} to it, by digest",
            )
