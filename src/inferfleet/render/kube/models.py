"""Model volumes: filled by ``inferfleet models fetch`` + ``verify`` in init containers.

The init containers run the same commands an operator runs on a host
(:func:`models_command`), with the same gates: every declared file's size and
sha256 (L-01, L-08, L-09). They read a fleet file of their own, holding only
the exported models (each fetched into its volume, ``dir: /mnt/models/<name>``)
and their manifests verbatim, from a ConfigMap; the Hub token comes from a
Secret reference, never from the spec (L-06, L-55).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferfleet.artifacts.manifest import MAX_MANIFEST_BYTES, declared_files
from inferfleet.bounded import read_tree_file
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, HubSource, PathSource
from inferfleet.fleetfile.kubernetes import KubernetesTarget
from inferfleet.render.kube.objects import Obj, metadata, quantity, to_yaml

MODELS_CONFIGMAP = "inferfleet-models"
# The init containers keep everything under /mnt: the volume they fill, the fleet file
# they read and their own scratch (cache, state, HOME). The server mounts the same
# volume where the launch resolver put the model, /models/<name>, read-only.
FLEET_MOUNT = "/mnt/fleet"
FLEET_FILE = f"{FLEET_MOUNT}/fleet.yaml"
MODELS_ROOT = "/mnt/models"
SCRATCH = "/mnt/scratch"  # the tools' own cache and state (records, locks): per pod


def models_command(verb: str, model: str, fleet_file: str) -> list[str]:
    """``inferfleet models fetch|verify MODEL -f FILE``: what a pod's init container runs."""
    if verb not in {"fetch", "verify"}:
        raise ValueError(f"unknown models verb {verb!r}")
    return ["inferfleet", "models", verb, model, "-f", fleet_file]


def model_folder(model: str) -> str:
    """Where the init containers mount the model's volume (and fetch into)."""
    return f"{MODELS_ROOT}/{model}"


def fetchable(fleet: Fleet, model: str) -> str | None:
    """Why ``model`` cannot be fetched into a volume in the cluster, or None."""
    source = fleet.models[model].source
    if not isinstance(source, HubSource):
        kind = "a path on a host" if isinstance(source, PathSource) else "a Python package"
        return f"its source is {kind}; in a cluster the init container fetches from the Hub"
    return None


def models_fleet(fleet: Fleet, root: Path, models: list[str]) -> dict[str, str]:
    """The init containers' fleet file and the manifests it names, as ConfigMap data."""
    data: dict[str, str] = {}
    section: dict[str, Any] = {}
    for name in models:
        model = fleet.models[name]
        problem = fetchable(fleet, name)
        if problem is not None:
            raise UsageError(
                f"model {name!r} cannot be exported: {problem}",
                where=f"models.{name}.source",
                hint="give it a hub source (repo and a pinned revision)",
            )
        source = model.source
        assert isinstance(source, HubSource)
        entry: dict[str, Any] = {
            "source": {"hub": source.hub, "revision": source.revision},
            "dir": model_folder(name),
        }
        if model.main is not None:
            entry["main"] = model.main
        declared_files(model, root)  # a missing or malformed manifest fails here, with its line
        if model.manifest is not None:
            # Copied verbatim: the same sizes and hashes the hosts verify against.
            key = f"{name}.manifest"
            data[key] = read_tree_file(
                root,
                model.manifest,
                MAX_MANIFEST_BYTES,
                what="model manifest",
                error=UsageError,
                where=f"models.{name}.manifest",
            )
            entry["manifest"] = key
        else:
            entry["files"] = [f.model_dump(mode="json", exclude_none=True) for f in model.files]
        section[name] = entry
    doc = {"version": 1, "hosts": {}, "models": section}
    data["fleet.yaml"] = (
        "# The exported models, for the init containers' `inferfleet models fetch` / `verify`.\n"
        + to_yaml(doc)
    )
    return data


def models_configmap(fleet: Fleet, root: Path, models: list[str], namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(MODELS_CONFIGMAP, namespace),
        "data": models_fleet(fleet, root, models),
    }


def init_containers(target: KubernetesTarget, volumes: list[tuple[str, str]]) -> list[Obj]:
    """``fetch-<volume>`` then ``verify-<volume>`` for each (volume name, model) of a pod."""
    env = [
        # Public repositories need no token: the Secret is optional; its value stays in it.
        {
            "name": "HF_TOKEN",
            "valueFrom": {
                "secretKeyRef": {
                    "name": target.hub_token_secret,
                    "key": "HF_TOKEN",
                    "optional": True,
                }
            },
        },
        {"name": "HOME", "value": SCRATCH},
        {"name": "INFERFLEET_CACHE_DIR", "value": f"{SCRATCH}/cache"},
        {"name": "INFERFLEET_STATE_DIR", "value": f"{SCRATCH}/state"},
    ]
    found: list[Obj] = []
    for volume, model in volumes:
        mounts = [
            {"name": volume, "mountPath": model_folder(model)},
            {"name": "fleet", "mountPath": FLEET_MOUNT, "readOnly": True},
            {"name": "scratch", "mountPath": SCRATCH},
        ]
        for verb in ("fetch", "verify"):
            found.append(
                {
                    "name": f"{verb}-{volume}",
                    "image": target.tools_image,
                    "command": models_command(verb, model, FLEET_FILE),
                    "env": env,
                    "volumeMounts": mounts,
                }
            )
    return found


def claim_template(name: str, size: int, target: KubernetesTarget) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": quantity(size)}},
    }
    if target.storage_class is not None:
        spec["storageClassName"] = target.storage_class
    return {"metadata": {"name": name}, "spec": spec}


def volume_size(target: KubernetesTarget, model: str) -> int | None:
    """The size of ``model``'s volume: kubernetes.volumes, else volume_size, else None."""
    return target.volumes.get(model, target.volume_size)
