"""extra_args parsed, not appended blind: field flags refused, misspelt flags caught, mmap on.

Through the real CLI (`inferfleet check` exits 1 naming the field to use),
against the REAL llama-server this project builds (its own `--help`), and
with the parsed flag list cached per binary. L-25 (field flags: `-c` and
`--parallel` silently break the per-slot contract), L-42 (a flag the pinned
runtime does not take crash-loops the unit), L-23 (mmap on is a rule).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import DIGEST, Patch, build
from fixtures.gguf_builder import Q8_0
from test_check_header_rules import model as header_model

from inferfleet.install import runtime_flags
from inferfleet.runtimes.flags import FlagList

S = "services"
# Rules whose incident needs the runtime's own flag list (see test_check_rules).
FLAG_LIST_RULES = {"extra-args-unknown-flag"}
# Rules whose incident needs a model's GGUF header written here (the L-23 section).
MMAP_RULES = {"mmap-disabled"}


def write(tmp_path: Path, patch: Patch) -> Path:
    path = tmp_path / "fleet.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    return path


def check_json(cli: Any, path: Path) -> tuple[int, dict[str, Any]]:
    result = cli("check", "--json", str(path))
    return result.code, json.loads(result.stdout)


SGLANG = {"runtimes.sgl": {"kind": "sglang", "image": "docker.io/lmsys/sglang" + DIGEST}}

# (service, extra_args, field, extra patch): every family of field flag, in every spelling form.
FIELD_FLAGS = [
    ("chat", ["-c", "32768"], "ctx_per_slot", {}),
    ("chat", ["--ctx-size=32768"], "ctx_per_slot", {}),
    ("chat", ["--parallel", "4"], "parallel", {}),
    ("chat", ["-np", "4"], "parallel", {}),
    ("chat", ["--kv-unified"], "ctx_per_slot", {}),
    ("chat", ["-fa", "off"], "flash_attn", {}),
    ("chat", ["--flash-attn=off"], "flash_attn", {}),
    ("chat", ["-ctv", "q8_0"], "kv_cache.v", {}),
    ("chat", ["--cache-type-k", "q4_0"], "kv_cache.k", {}),
    ("chat", ["-ot", "exps=CUDA1"], "tensor_overrides", {}),
    ("chat", ["--override-tensor=exps=CPU"], "tensor_overrides", {}),
    ("chat", ["-cmoe"], "tensor_overrides", {}),
    ("chat", ["-ngl", "20"], "devices", {}),
    ("chat", ["-sm", "row"], "split_mode", {}),
    ("chat", ["-ts", "3,1"], "tensor_split", {}),
    ("chat", ["--host", "0.0.0.0"], "bind", {}),
    ("chat", ["--port", "9000"], "port", {}),
    ("chat", ["-m", "/models/other.gguf"], "model", {}),
    ("chat", ["-hf", "org/repo:Q4_K_M"], "model", {}),
    ("chat", ["-a", "other"], "alias", {}),
    ("chat", ["-mm", "/models/mmproj.gguf"], "mmproj", {}),
    ("chat", ["--jinja"], "jinja", {}),
    ("chat", ["--chat-template-file", "/t.jinja"], "chat_template_file", {}),
    ("chat", ["--chat-template-kwargs", "{}"], "chat_template_kwargs", {}),
    ("chat", ["--metrics"], "metrics", {}),
    ("chat", ["--api-key-file", "/etc/keys"], "secrets_env", {}),
    ("serve", ["--gpu-memory-utilization", "1.0"], "gpu_memory_utilization", {}),
    ("serve", ["--gpu_memory_utilization=1.0"], "gpu_memory_utilization", {}),
    ("serve", ["--max-model-len", "65536"], "ctx_per_slot", {}),
    ("serve", ["--max-num-seqs", "16"], "parallel", {}),
    ("serve", ["-tp", "2"], "tensor_parallel", {}),
    ("serve", ["--kv-cache-dtype", "fp8"], "kv_cache", {}),
    ("serve", ["--served-model-name", "x"], "alias", {}),
    ("serve", ["--mem-fraction-static", "0.99"], "gpu_memory_utilization", SGLANG),
    ("serve", ["--context-length", "65536"], "ctx_per_slot", SGLANG),
    ("serve", ["--tp", "2"], "tensor_parallel", SGLANG),
]


@pytest.mark.parametrize(("service", "args", "field", "extra"), FIELD_FLAGS)
def test_a_field_flag_in_extra_args_fails_check_naming_the_field(
    cli: Any, tmp_path: Path, service: str, args: list[str], field: str, extra: Patch
) -> None:
    patch = {**extra, f"{S}.{service}.extra_args": ["--seed", "7", *args]}
    if extra:
        patch[f"{S}.{service}.runtime"] = "sgl"
    code, doc = check_json(cli, write(tmp_path, patch))
    assert code == 1
    hits = [f for f in doc["findings"] if f["rule"] == "extra-args-field-flag"]
    assert [h["field"] for h in hits] == [f"services.{service}.extra_args[2]"], doc["findings"]
    assert f"use `services.{service}.{field}`" in hits[0]["hint"]
    assert hits[0]["line"] is not None


def test_the_human_report_says_which_field_to_use(cli: Any, tmp_path: Path) -> None:
    result = cli("check", str(write(tmp_path, {f"{S}.chat.extra_args": ["-c", "32768"]})))
    assert result.code == 1
    assert "error L-25 extra-args-field-flag services.chat.extra_args[0]" in result.stdout
    assert "use `services.chat.ctx_per_slot`" in result.stdout


def test_a_speculative_field_flag_is_reported_once_by_the_speculative_rule(
    cli: Any, tmp_path: Path
) -> None:
    code, doc = check_json(
        cli, write(tmp_path, {f"{S}.chat.extra_args": ["--spec-draft-n-max", "8"]})
    )
    assert code == 1
    assert [f["rule"] for f in doc["findings"]] == ["spec-flags-in-extra-args"]
    assert "use `services.chat.speculative.draft_max`" in doc["findings"][0]["hint"]


def test_flag_values_are_not_mistaken_for_flags(cli: Any, tmp_path: Path) -> None:
    # "-c" here is the value of --reverse-prompt, "-1" a value: neither is a flag.
    patch = {f"{S}.chat.extra_args": ["--reverse-prompt", "x", "--temp", "-1", "--seed", "3"]}
    code, doc = check_json(cli, write(tmp_path, patch))
    assert code == 0, doc["findings"]


# ---------------------------------------------------------------- render refuses too


def test_render_refuses_a_field_flag_and_writes_nothing(cli: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "repo", {f"{S}.chat.extra_args": ["--parallel=4", "-fa", "off"]})
    for gate in ((), ("--no-check",)):
        out = tmp_path / f"out{len(gate)}"
        result = cli("render", "--out", str(out), "-f", str(path), *gate)
        assert result.code == 2, result.stdout + result.stderr
        assert not out.exists() or not any(out.iterdir())
    # Without the check the launch pipeline itself refuses, naming both fields.
    text = result.stderr + result.stdout
    assert "--parallel, -fa in extra_args" in text  # flags only: no value is echoed
    assert "use `services.chat.parallel`" in text and "use `services.chat.flash_attn`" in text


def test_render_passes_a_flag_without_a_field(cli: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "repo", {f"{S}.chat.extra_args": ["--ubatch-size", "256"]})
    out = tmp_path / "out"
    result = cli("render", "--out", str(out), "-f", str(path))
    assert result.code == 0, result.stdout + result.stderr
    unit = next(out.rglob("inferfleet-chat.service")).read_text()
    assert "--ubatch-size 256" in unit


# ---------------------------------------------------------------- the runtime's own flags


def real_runtime(binary: Path, args: list[str], **patch: Any) -> Patch:
    # Pinned (binary-not-pinned, L-42): check sees that pins are there; the
    # host compares them with the binary before a start (tests/deploy).
    pins = {"version": "pinned-in-the-test", "sha256": "0" * 64}
    return {
        "runtimes.lcpp": {"kind": "llama.cpp", "binary": str(binary), **pins},
        f"{S}.chat.extra_args": args,
        **patch,
    }


def test_a_misspelt_flag_fails_against_the_real_llama_server(
    cli: Any, tmp_path: Path, llama_server_binary: Path
) -> None:
    patch = real_runtime(llama_server_binary, ["--temprature", "0.7", "--cache-reuse", "256"])
    code, doc = check_json(cli, write(tmp_path, patch))
    assert code == 1
    (hit,) = [f for f in doc["findings"] if f["rule"] == "extra-args-unknown-flag"]
    assert hit["field"] == "services.chat.extra_args[0]"
    assert hit["lesson"] == "L-42"
    assert "--temprature" in hit["message"] and str(llama_server_binary) in hit["message"]
    assert "misspelt? did you mean --temperature" in hit["hint"]


def test_llama_server_takes_no_flag_equals_value(
    cli: Any, tmp_path: Path, llama_server_binary: Path
) -> None:
    code, doc = check_json(cli, write(tmp_path, real_runtime(llama_server_binary, ["--temp=0.7"])))
    assert code == 1
    (hit,) = [f for f in doc["findings"] if f["rule"] == "extra-args-unknown-flag"]
    assert "write it as two words: --temp, 0.7" in hit["hint"]


def test_valid_unusual_flags_pass_against_the_real_llama_server(
    cli: Any, tmp_path: Path, llama_server_binary: Path
) -> None:
    args = ["--cache-reuse", "256", "-lv", "3", "--no-warmup", "--control-vector-layer-range",
            "2", "9", "--reasoning-budget", "-1", "--load-mode", "mmap+mlock"]  # fmt: skip
    code, doc = check_json(cli, write(tmp_path, real_runtime(llama_server_binary, args)))
    assert code == 0, doc["findings"]
    assert not [s for s in doc["skipped"] if s["rule"] == "extra-args-unknown-flag"]


def test_without_the_binary_the_rule_skips_saying_why(cli: Any, tmp_path: Path) -> None:
    patch = real_runtime(tmp_path / "missing" / "llama-server", ["--temprature", "0.7"])
    code, doc = check_json(cli, write(tmp_path, patch))
    assert code == 0
    (skip,) = [s for s in doc["skipped"] if s["rule"] == "extra-args-unknown-flag"]
    assert "is not on this machine" in skip["reason"]
    strict = cli("check", "--strict", str(tmp_path / "fleet.yaml"))
    said = " ".join(strict.stdout.split())
    assert "not checked (1 rule for chat)" in said and "is not on this machine" in said


HELP = """\
----- common params -----

-h,    --help, --usage                  print usage and exit
-c,    --ctx-size N                     size of the prompt context
--temp, --temperature N                 temperature (default: 0.80)
-kvo,  --kv-offload, -nkvo, --no-kv-offload
                                        whether to enable KV cache offloading
--control-vector-layer-range START END
                                        layer range
"""


def fake_binary(folder: Path) -> tuple[Path, Path]:
    """A program that prints a --help and counts how often it ran."""
    folder.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls"
    script = folder / "llama-server"
    script.write_text(f"#!/bin/sh\necho run >> '{calls}'\ncat <<'EOF'\n{HELP}EOF\n")
    script.chmod(0o755)
    return script, calls


def test_the_parsed_flags_are_cached_per_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    binary, calls = fake_binary(tmp_path / "bin")
    first = runtime_flags.read_flags(binary)
    assert isinstance(first, FlagList)
    assert first.flags["--ctx-size"] == 1 and first.flags["--no-kv-offload"] == 0
    assert first.flags["--control-vector-layer-range"] == 2
    assert runtime_flags.read_flags(binary) == first
    assert calls.read_text().count("run") == 1  # the second read ran nothing
    # A changed binary (new mtime) is read again.
    stat = binary.stat()
    os.utime(binary, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert runtime_flags.read_flags(binary) == first
    assert calls.read_text().count("run") == 2


@pytest.mark.parametrize(
    "damage",
    ["{not json", "[]", '{"program": "x", "flags": {"--a": 7}}', '{"flags": {}}', "", "FIFO",
     "HUGE"],
)  # fmt: skip
def test_a_damaged_cache_is_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """Damaged, a FIFO (a plain read would hang check) or too large: read the binary again."""
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    binary, calls = fake_binary(tmp_path / "bin")
    good = runtime_flags.read_flags(binary)
    cached = runtime_flags.cache_path(binary)
    cached.unlink()
    if damage == "FIFO":
        os.mkfifo(cached)
    elif damage == "HUGE":
        cached.write_bytes(b" " * (runtime_flags.MAX_CACHE_BYTES + 1))
    else:
        cached.write_text(damage)
    assert runtime_flags.read_flags(binary) == good
    assert calls.read_text().count("run") == 2
    assert FlagList.from_json(json.loads(cached.read_text())) == good


def test_a_binary_that_lists_no_flags_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    script = tmp_path / "silent"
    script.write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 139\n")
    script.chmod(0o755)
    reason = runtime_flags.read_flags(script)
    assert isinstance(reason, str) and "exit 139" in reason and "listed no flags" in reason
    assert not (tmp_path / "cache" / "flags").exists() or not any(
        (tmp_path / "cache" / "flags").iterdir()
    )


# ---------------------------------------------------------------- L-23: mmap on


def with_embeddings(tmp_path: Path, patch: Patch, vocab: int) -> Path:
    """The fleet with model m's GGUF header written where its source points: a per-layer
    embedding table of 7680 x ``vocab`` at Q8_0 (Gemma 3n's shape; 262144 -> 2.0 GiB)."""
    folder = tmp_path / "models" / "m"
    folder.mkdir(parents=True, exist_ok=True)
    header = header_model().tensor("per_layer_token_embd.weight", (7680, vocab), Q8_0)
    files = []
    for name in ("m.gguf", "mmproj.gguf"):
        size = header.write(folder / name, data=False).stat().st_size
        files.append({"path": name, "size": size})
    return write(
        tmp_path, {**patch, "models.m.source": {"path": str(folder)}, "models.m.files": files}
    )


HUGE, SMALL = 262144, 64  # Gemma's vocabulary (2.0 GiB of per-layer embeddings); a toy one


@pytest.mark.parametrize(
    ("incident", "culprit"),
    [
        ({f"{S}.chat.extra_args": ["--no-mmap"]}, "--no-mmap"),
        ({f"{S}.chat.extra_args": ["-lm", "none"]}, "-lm none"),
        ({f"{S}.chat.extra_args": ["--load-mode", "mlock"]}, "--load-mode mlock"),
        ({f"{S}.chat.runtime_env": {"LLAMA_ARG_LOAD_MODE": "dio"}}, "LLAMA_ARG_LOAD_MODE=dio"),
        ({f"{S}.chat.runtime_env": {"LLAMA_ARG_NO_MMAP": "1"}}, "LLAMA_ARG_NO_MMAP=1"),
    ],
)
def test_mmap_off_is_an_error(cli: Any, tmp_path: Path, incident: Patch, culprit: str) -> None:
    """Mutation killed: ``mmap_disabled`` returning None (mmap off not seen)."""
    code, doc = check_json(cli, with_embeddings(tmp_path, incident, HUGE))
    assert code == 1
    (hit,) = [f for f in doc["findings"] if f["rule"] == "mmap-disabled"]
    assert hit["lesson"] == "L-23" and hit["severity"] == "error"
    assert f"mmap off ({culprit})" in hit["message"]
    assert "model 'm' has 2.0 GiB of embedding tables" in hit["message"]
    key = culprit.split("=")[0]
    expected = f"runtime_env.{key}" if "=" in culprit else "extra_args"
    assert hit["field"] == f"services.chat.{expected}"


def test_mmap_off_for_a_small_embedding_table_is_not_the_lesson(cli: Any, tmp_path: Path) -> None:
    """The rule is scoped to what L-23 says: huge embedding tables. A toy table with
    mmap off loads either way. Mutation killed: dropping the size test (the rule
    fires for every model again)."""
    code, doc = check_json(
        cli, with_embeddings(tmp_path, {f"{S}.chat.extra_args": ["--no-mmap"]}, SMALL)
    )
    assert [f for f in doc["findings"] if f["rule"] == "mmap-disabled"] == [], doc["findings"]
    assert code == 0, doc["findings"]


def test_mmap_off_without_the_header_is_a_skip_that_says_why(cli: Any, tmp_path: Path) -> None:
    """Whether the tables are huge is read from the header; without it the rule says so."""
    code, doc = check_json(cli, write(tmp_path, {f"{S}.chat.extra_args": ["--no-mmap"]}))
    (skip,) = [s for s in doc["skipped"] if s["rule"] == "mmap-disabled"]
    assert "'m' is not on this machine" in skip["reason"]
    assert code == 0


@pytest.mark.parametrize(
    "fixed",
    [
        {},
        {f"{S}.chat.extra_args": ["--load-mode", "mmap"]},
        {f"{S}.chat.extra_args": ["-lm", "mmap+mlock"]},
        {f"{S}.chat.runtime_env": {"LLAMA_ARG_LOAD_MODE": "auto"}},
    ],
)
def test_mmap_on_passes(cli: Any, tmp_path: Path, fixed: Patch) -> None:
    code, doc = check_json(cli, with_embeddings(tmp_path, fixed, HUGE))
    assert code == 0, doc["findings"]
    assert not [s for s in doc["skipped"] if s["rule"] == "mmap-disabled"]
