"""The cluster runs what the hosts run: the launch resolver's argv, gates, devices, exposure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_fleets import BASE, write
from kube_helpers import HOMELAB, find, objects, render

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render import gateway as hosts_gateway
from inferfleet.render import prometheus
from inferfleet.render.facts import default_facts
from inferfleet.render.kube.gateway import gateway_config
from inferfleet.render.kube.models import FLEET_FILE, models_command
from inferfleet.render.kube.workload import kube_fleet
from inferfleet.render.launch import resolve


def _pod(name: str) -> dict[str, Any]:
    statefulset = find(render(), "StatefulSet", f"inferfleet-{name}")
    spec: dict[str, Any] = statefulset["spec"]["template"]["spec"]
    return spec


def _host_argv(name: str) -> list[str]:
    loaded = load_fleet(HOMELAB)
    service = loaded.fleet.services[name]
    facts = default_facts(loaded.fleet.hosts[service.host])
    return resolve(loaded.fleet, loaded.root, name, facts).argv


def test_a_container_runtime_runs_the_hosts_exact_argv() -> None:
    """chat runs from the same vLLM image on its host (Quadlet): the argv is identical."""
    server = _pod("chat")["containers"][0]
    assert server["command"] == _host_argv("chat")
    assert server["image"].startswith("docker.io/rocm/vllm@sha256:")
    command = server["command"]
    # The per-slot window and the slots are the client contract (L-25): unchanged.
    assert command[command.index("--max-model-len") + 1] == "65536"
    assert command[command.index("--max-num-seqs") + 1] == "8"


def test_a_source_runtime_runs_its_image_with_the_resolvers_argv() -> None:
    """coder is built from source on its host; in the cluster it runs the named image, with
    the argv the resolver gives that image (same flags, paths inside the pod)."""
    loaded = load_fleet(HOMELAB)
    fleet = loaded.fleet
    assert fleet.kubernetes is not None
    server = _pod("coder")["containers"][0]
    facts = default_facts(fleet.hosts["forge"])
    expected = resolve(kube_fleet(fleet, fleet.kubernetes), loaded.root, "coder", facts).argv
    assert server["command"] == expected
    assert server["image"] == fleet.kubernetes.images["llama-cuda"]
    on_host = _host_argv("coder")
    assert len(on_host) == len(expected)
    for index, (host_word, pod_word) in enumerate(zip(on_host, expected, strict=True)):
        if host_word == pod_word or index == 0:  # the program: the host's build, the image's
            continue
        if expected[index - 1] == "--host":  # the pod's own namespace: every address
            assert pod_word == "0.0.0.0"
            continue
        # Otherwise only where files are: model, chat template.
        assert host_word.startswith("/") and pod_word.startswith("/"), (host_word, pod_word)
    assert expected[expected.index("--ctx-size") + 1] == "98304"
    assert expected[expected.index("--parallel") + 1] == "3"
    assert "/models/qwen3-coder-30b/Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf" in expected


def test_gpu_requests_follow_the_services_devices() -> None:
    assert _pod("chat")["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "2"}
    assert _pod("vision")["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "1"}
    assert _pod("coder")["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_startup_probe_waits_the_health_timeout_then_readiness_and_liveness_take_over() -> None:
    fleet = load_fleet(HOMELAB).fleet
    for name in ("chat", "vision", "coder"):
        server = _pod(name)["containers"][0]
        health = fleet.services[name].health
        startup = server["startupProbe"]
        # 503 while loading (L-34): the probe tolerates it for the whole timeout.
        assert startup["periodSeconds"] * startup["failureThreshold"] >= health.timeout
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert server[probe]["httpGet"] == {"path": health.path, "port": "http"}
    assert _pod("chat")["containers"][0]["startupProbe"]["failureThreshold"] == 120  # 20m


def test_init_containers_fetch_then_verify_with_the_models_command() -> None:
    pod = _pod("vision")
    inits = pod["initContainers"]
    assert [c["name"] for c in inits] == ["fetch-model", "verify-model"]
    assert inits[0]["command"] == models_command("fetch", "qwen3.5-35b-a3b", FLEET_FILE)
    assert inits[1]["command"] == models_command("verify", "qwen3.5-35b-a3b", FLEET_FILE)
    # The Hub token is a Secret reference, never a value (L-06, L-55).
    token = next(e for e in inits[0]["env"] if e["name"] == "HF_TOKEN")
    assert token == {
        "name": "HF_TOKEN",
        "valueFrom": {
            "secretKeyRef": {"name": "inferfleet-hub-token", "key": "HF_TOKEN", "optional": True}
        },
    }
    server_mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "model", "mountPath": "/models/qwen3.5-35b-a3b", "readOnly": True} in (
        server_mounts
    )


def test_models_configmap_carries_the_declared_files_verbatim() -> None:
    loaded = load_fleet(HOMELAB)
    data = find(render(), "ConfigMap", "inferfleet-models")["data"]
    manifest = (loaded.root / "models/qwen3-30b-a3b-instruct-2507.manifest").read_text()
    assert data["qwen3-30b-a3b.manifest"] == manifest
    assert "20c2b211c631cec32e0ecb7b61c282f76ab3db65a1cd5113bf8650a5644fa9ec" in data["fleet.yaml"]


def test_every_replica_gets_its_own_model_volume_and_cache() -> None:
    statefulset = find(render(), "StatefulSet", "inferfleet-chat")
    claims = {c["metadata"]["name"]: c["spec"] for c in statefulset["spec"]["volumeClaimTemplates"]}
    assert claims["model"]["resources"]["requests"]["storage"] == "64Gi"
    assert claims["model"]["storageClassName"] == "local-path"
    assert claims["cache"]["resources"]["requests"]["storage"] == "20Gi"  # L-37
    shm = next(v for v in _pod("chat")["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}


def test_gateway_runs_the_hosts_gateway_config_at_cluster_addresses() -> None:
    """The in-cluster LiteLLM runs the config the hosts' gateway runs (render.gateway):
    the same models, contract, timeouts and key reference; only the backends' addresses
    change."""
    fleet = load_fleet(HOMELAB).fleet
    config = gateway_config(fleet, "inferfleet")
    hosts_config = hosts_gateway.config(fleet)
    assert len(config["model_list"]) == len(hosts_config["model_list"])
    bases = [m["litellm_params"].pop("api_base") for m in config["model_list"]]
    for m in hosts_config["model_list"]:
        m["litellm_params"].pop("api_base")
    assert config == hosts_config
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert bases == [
        "http://inferfleet-chat.inferfleet.svc:8000/v1",
        "http://inferfleet-vision.inferfleet.svc:8080/v1",
        "http://inferfleet-coder.inferfleet.svc:8080/v1",
    ]
    deployment = find(render(), "Deployment", "inferfleet-gateway")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "inferfleet-gateway-keys"}}]


def test_prometheus_rule_is_the_hosts_rules_and_monitors_label_like_the_hosts() -> None:
    fleet = load_fleet(HOMELAB).fleet
    rule = find(render(), "PrometheusRule", "inferfleet")
    assert rule["spec"]["groups"] == prometheus.rule_groups(fleet)
    monitors = [o for o in objects(render()) if o["kind"] == "ServiceMonitor"]
    assert [m["metadata"]["name"] for m in monitors] == [
        "inferfleet-chat",
        "inferfleet-vision",
        "inferfleet-coder",
    ]
    labels = {
        r["targetLabel"]: r["replacement"]
        for r in monitors[2]["spec"]["endpoints"][0]["relabelings"]
    }
    assert labels == {
        "service": "coder",
        "host": "forge",
        "runtime": "llama.cpp",
        "model": "qwen3-coder-30b",
    }


def _ingress(name: str) -> list[dict[str, Any]]:
    policy = find(render(), "NetworkPolicy", f"inferfleet-{name}")
    rules: list[dict[str, Any]] = policy["spec"]["ingress"]
    return rules


def test_network_policies_mirror_the_exposure_policy() -> None:
    role = "inferfleet.dev/role"
    # chat: loopback on its host -> only the gateway and proxy pods of the namespace.
    assert _ingress("chat")[0]["from"] == [
        {"podSelector": {"matchLabels": {role: "gateway"}}},
        {"podSelector": {"matchLabels": {role: "proxy"}}},
    ]
    # vision: lan -> the cluster's pods and the private ranges, never the internet.
    cidrs = [p["ipBlock"]["cidr"] for p in _ingress("vision")[0]["from"] if "ipBlock" in p]
    assert "0.0.0.0/0" not in cidrs and "192.168.0.0/16" in cidrs
    # the gateway: loopback on atlas -> only the proxy reaches it.
    assert _ingress("gateway") == [
        {
            "from": [{"podSelector": {"matchLabels": {role: "proxy"}}}],
            "ports": [{"port": "http", "protocol": "TCP"}],
        }
    ]
    deny = find(render(), "NetworkPolicy", "inferfleet-default-deny")
    assert "ingress" not in deny["spec"] and deny["spec"]["policyTypes"] == ["Ingress"]


def test_no_secret_value_in_any_manifest() -> None:
    for obj in objects(render()):
        if obj["kind"] == "Secret":
            raise AssertionError("a Secret was rendered; secrets are references only")
        for container in _containers(obj):
            for env in container.get("env", []):
                if any(w in env["name"] for w in ("TOKEN", "KEY", "SECRET", "PASSWORD")):
                    assert "value" not in env and "secretKeyRef" in env["valueFrom"], env


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] not in {"StatefulSet", "Deployment"}:
        return []
    spec = obj["spec"]["template"]["spec"]
    found: list[dict[str, Any]] = spec["containers"] + spec.get("initContainers", [])
    return found


def test_a_changed_input_rolls_only_its_service(tmp_path: Path) -> None:
    """Pods read ConfigMaps and model files besides their spec: their digest is in the pod
    template, so a change restarts that service's pods and no other's (L-40)."""
    key = "inferfleet.dev/inputs-sha256"

    def digests(changes: dict[str, Any]) -> dict[str, str]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        base = {
            "services.other": BASE["services"]["svc"] | {"port": 8081, "devices": []},
            "models.n": BASE["models"]["m"],
            "services.other.model": "n",
        }
        found = render(write(folder, base | changes))
        return {
            o["metadata"]["name"]: o["spec"]["template"]["metadata"]["annotations"][key]
            for o in objects(found)
            if o["kind"] == "StatefulSet"
        }

    before = digests({})
    tuned = digests({"services.svc.env": {"SAMPLING_TOP_K": "40"}})
    assert tuned["inferfleet-svc"] != before["inferfleet-svc"]
    assert tuned["inferfleet-other"] == before["inferfleet-other"]
    refiled = digests({"models.n.files": [{"path": "m.gguf", "size": 3 << 30, "sha256": "d" * 64}]})
    assert refiled["inferfleet-other"] != before["inferfleet-other"]
    assert refiled["inferfleet-svc"] == before["inferfleet-svc"]
