"""An llm service as a StatefulSet and its Service, from the one launch resolver.

The container's command is exactly the argv :func:`~inferfleet.render.launch.resolve`
gives the service as a container (model files under ``/models``, the compile
cache on ``/cache``, L-37; a writable ``HOME``, L-39): the cluster runs the
fleet's own runtime image, or for a runtime built from source the image the
``kubernetes:`` section names for it. A StatefulSet, not a Deployment: each
replica needs its own model volume filled and verified by its init
containers, and its own compile cache, kept across restarts
(volumeClaimTemplates). Probes follow the health gate (L-34): the startup
probe lets a loading server answer 503 for its whole health timeout; only
then do readiness and liveness take over on the same path.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from inferfleet.bounded import MAX_DECLARED_TEXT, read_tree_file
from inferfleet.errors import UsageError
from inferfleet.fleetfile.base import PIN_HINT, pinned_image
from inferfleet.fleetfile.fleet import Fleet, Runtime, Service
from inferfleet.fleetfile.kubernetes import KubernetesTarget
from inferfleet.render.envfile import env_file, parse_env_text
from inferfleet.render.facts import default_facts
from inferfleet.render.kube.devices import gpu_problem, gpu_requests
from inferfleet.render.kube.models import (
    MODELS_CONFIGMAP,
    claim_template,
    init_containers,
    models_fleet,
    volume_size,
)
from inferfleet.render.kube.objects import Obj, labels, metadata, object_name, quantity, selector
from inferfleet.render.launch import CACHE_MOUNT, TEMPLATE_MOUNT, Resolved, resolve
from inferfleet.render.systemd import stop_timeout

PROBE_PERIOD_S = 10
TEMPLATE_KEY = "chat-template.jinja"


def kube_fleet(fleet: Fleet, target: KubernetesTarget) -> Fleet:
    """The fleet as the cluster runs it: every runtime an image, every container bridged.

    A runtime built from source runs from the image ``kubernetes.images`` names
    for it; a pod has its own network namespace, so the launch resolver puts
    the server on every address of the pod (the Service and the network
    policies decide who reaches it).
    """
    runtimes: dict[str, Runtime] = {}
    for name, runtime in fleet.runtimes.items():
        image = target.images.get(name)
        if runtime.image is None and image is not None:
            runtime = runtime.model_copy(
                update={
                    "image": image,
                    "binary": None,
                    "source": None,
                    "version": None,
                    "sha256": None,
                }
            )
        runtimes[name] = runtime
    services: dict[str, Service] = {}
    for name, service in fleet.services.items():
        bridged = service.container.model_copy(update={"network": "bridge"})
        services[name] = service.model_copy(update={"container": bridged})
    return fleet.model_copy(update={"runtimes": runtimes, "services": services})


def exported_services(fleet: Fleet) -> list[str]:
    """The services a cluster gets: the llm ones (other containers stay on their hosts)."""
    return [name for name, s in fleet.services.items() if s.kind == "llm"]


def exported_models(fleet: Fleet) -> list[str]:
    """The models the exported services load (served and drafter), in fleet order."""
    used: set[str] = set()
    for name in exported_services(fleet):
        used.update(fleet.services[name].models_loaded)
    return [m for m in fleet.models if m in used]


def resolve_in_pod(fleet: Fleet, root: Path, name: str) -> Resolved:
    """The service's container launch, or a clear error for what a pod cannot run."""
    target = fleet.kubernetes
    assert target is not None
    service = fleet.services[name]
    runtime_name = service.runtime or ""
    if fleet.runtimes[runtime_name].image is None and runtime_name not in target.images:
        raise UsageError(
            f"service {name!r} runs runtime {runtime_name!r}, which has no image for the cluster",
            where=f"kubernetes.images.{runtime_name}",
            hint="build an image from the runtime's pinned source and name it, by digest, in "
            "kubernetes.images (L-42)",
        )
    problem = gpu_problem(service, fleet.hosts[service.host])
    if problem is not None:
        raise UsageError(
            f"service {name!r}: its devices cannot be GPU requests: {problem}",
            where=f"services.{name}.devices",
            hint="see `inferfleet explain kube-gpu-request`",
        )
    host = fleet.hosts[service.host]
    resolved = resolve(kube_fleet(fleet, target), root, name, default_facts(host))
    assert resolved.image is not None
    if not pinned_image(resolved.image):
        raise UsageError(
            f"service {name!r} would run image {resolved.image!r}, which is not pinned by digest",
            where=f"services.{name}.runtime",
            hint=PIN_HINT,
        )
    return resolved


def _volumes(
    resolved: Resolved, fleet: Fleet, target: KubernetesTarget
) -> tuple[list[Obj], list[Obj], list[Obj], list[tuple[str, str]]]:
    """Mounts of the server, pod volumes, claim templates and the (volume, model) to fill."""
    name = resolved.name
    mounts: list[Obj] = []
    pod: list[Obj] = [
        {"name": "fleet", "configMap": {"name": MODELS_CONFIGMAP}},
        {"name": "scratch", "emptyDir": {}},
    ]
    claims: list[Obj] = []
    fills: list[tuple[str, str]] = []
    for mount in resolved.mounts:
        inside = PurePosixPath(mount.container)
        if inside.parent == PurePosixPath("/models"):
            model = inside.name
            volume = "model" if model == resolved.service.model else "draft"
            if any(f == (volume, model) for f in fills):
                continue  # a drafter that is the served model itself: one volume
            size = volume_size(target, model)
            if size is None:
                raise UsageError(
                    f"model {model!r} of service {name!r} has no volume size",
                    where="kubernetes.volumes",
                    hint=f"set kubernetes.volumes.{model} or kubernetes.volume_size",
                )
            claims.append(claim_template(volume, size, target))
            fills.append((volume, model))
            mounts.append({"name": volume, "mountPath": mount.container, "readOnly": True})
        elif mount.container == CACHE_MOUNT:
            claims.append(claim_template("cache", target.cache_size, target))
            mounts.append({"name": "cache", "mountPath": CACHE_MOUNT})
        elif mount.container == TEMPLATE_MOUNT:
            pod.append({"name": "template", "configMap": {"name": f"{object_name(name)}-template"}})
            mounts.append(
                {
                    "name": "template",
                    "mountPath": TEMPLATE_MOUNT,
                    "subPath": TEMPLATE_KEY,
                    "readOnly": True,
                }
            )
        else:
            raise UsageError(
                f"service {name!r} mounts {mount.host} from its host at {mount.container}; "
                "a pod has no host folders",
                where=f"services.{name}.container.volumes",
                hint="drop the volume for the export (or overlay a volume with kustomize)",
            )
    shm = resolved.service.container.shm_size
    if shm is not None:
        pod.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(shm)}})
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
    return mounts, pod, claims, fills


def _probe(path: str, *, period: int, failures: int) -> Obj:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _server(resolved: Resolved, memory: int | None) -> Obj:
    service = resolved.service
    env = [{"name": k, "value": v} for k, v in sorted(resolved.container_env.items())]
    env_from: list[Obj] = []
    if parse_env_text(env_file(resolved.name, service))[0]:
        env_from.append({"configMapRef": {"name": f"{object_name(resolved.name)}-env"}})
    if service.secrets_env is not None:
        # A reference: the Secret holds what the host's untracked env file holds (L-55).
        env_from.append({"secretRef": {"name": f"{object_name(resolved.name)}-secrets"}})
    gpus = gpu_requests(service, resolved.host)
    requests: dict[str, str] = {k: str(v) for k, v in gpus.items()}
    if memory is not None:
        # No memory limit: a model kept on mmap (L-23) fills the page cache; a limit
        # would let the cgroup kill the server silently.
        requests["memory"] = quantity(memory)
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if gpus:
        resources["limits"] = {k: str(v) for k, v in gpus.items()}
    health = service.health
    container: Obj = {
        "name": "server",
        "image": resolved.image,
        "command": list(resolved.argv),
        "ports": [{"name": "http", "containerPort": resolved.container_port, "protocol": "TCP"}],
        # The load answers 503 (or refuses) for minutes: the startup probe waits the whole
        # health timeout before liveness may restart it (L-34).
        "startupProbe": _probe(
            health.path,
            period=PROBE_PERIOD_S,
            failures=max(1, math.ceil(health.timeout / PROBE_PERIOD_S)),
        ),
        "readinessProbe": _probe(health.path, period=PROBE_PERIOD_S, failures=3),
        "livenessProbe": _probe(health.path, period=2 * PROBE_PERIOD_S, failures=3),
    }
    if service.container.user is not None:
        container["securityContext"] = _run_as(resolved.name, service.container.user)
    if env:
        container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    if resources:
        container["resources"] = resources
    return container


def _run_as(name: str, user: str) -> Obj:
    """``container.user`` (podman's ``UID[:GID]``) as the pod's numeric user and group."""
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise UsageError(
            f"service {name!r} runs as user {user!r}; a pod runs as a numeric UID[:GID]",
            where=f"services.{name}.container.user",
            hint="write the numeric ids, e.g. 1000:1000",
        )
    found: Obj = {"runAsUser": int(uid)}
    if gid:
        found["runAsGroup"] = int(gid)
    return found


def service_objects(
    fleet: Fleet, root: Path, name: str, namespace: str, memory: Mapping[str, int]
) -> list[Obj]:
    """The StatefulSet, its Service and its ConfigMaps (tunables, chat template)."""
    target = fleet.kubernetes
    assert target is not None
    resolved = resolve_in_pod(fleet, root, name)
    service = resolved.service
    mounts, pod_volumes, claims, fills = _volumes(resolved, fleet, target)
    server = _server(resolved, memory.get(name))
    server["volumeMounts"] = mounts
    own = object_name(name)
    pod_labels = labels(name, "llm")
    found: list[Obj] = []
    tunables = parse_env_text(env_file(name, service))[0]
    if tunables:
        found.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(f"{own}-env", namespace, pod_labels),
                "data": dict(sorted(tunables.items())),
            }
        )
    if service.chat_template_file is not None:
        found.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(f"{own}-template", namespace, pod_labels),
                "data": {TEMPLATE_KEY: _read(root, name, service.chat_template_file)},
            }
        )
    found.append(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": metadata(own, namespace, pod_labels),
            "spec": {
                "serviceName": own,
                "replicas": 1,
                "selector": {"matchLabels": selector(name)},
                "template": {
                    "metadata": {
                        "labels": pod_labels,
                        "annotations": {
                            "inferfleet.dev/inputs-sha256": _inputs(found, fleet, root, fills)
                        },
                    },
                    "spec": {
                        "terminationGracePeriodSeconds": math.ceil(stop_timeout(resolved)),
                        "initContainers": init_containers(target, fills),
                        "containers": [server],
                        "volumes": pod_volumes,
                    },
                },
                "volumeClaimTemplates": claims,
            },
        }
    )
    found.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(own, namespace, pod_labels),
            "spec": {
                "selector": selector(name),
                "ports": [
                    {"name": "http", "port": service.port, "targetPort": "http", "protocol": "TCP"}
                ],
            },
        }
    )
    return found


def _inputs(configmaps: list[Obj], fleet: Fleet, root: Path, fills: list[tuple[str, str]]) -> str:
    """A digest of what the pod reads besides its spec: its ConfigMaps and its models' declared
    files. A change rolls this service's pods only (deploys are service-scoped, L-40)."""
    models = models_fleet(fleet, root, sorted({model for _, model in fills}))
    data = {"configmaps": [c["data"] for c in configmaps], "models": models}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def cluster_url(name: str, port: int, namespace: str) -> str:
    """The service's OpenAI base URL inside the cluster (its Service's DNS name)."""
    return f"http://{object_name(name)}.{namespace}.svc:{port}/v1"


def _read(root: Path, name: str, relative: str) -> str:
    return read_tree_file(
        root,
        relative,
        MAX_DECLARED_TEXT,
        what="chat template file",
        error=UsageError,
        where=f"services.{name}.chat_template_file",
        hint="commit the template next to the fleet file; chat_template_file is relative to it",
    )
