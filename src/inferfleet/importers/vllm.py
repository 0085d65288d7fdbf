"""A vLLM command line (``vllm serve MODEL ...``) read back into service fields.

The inverse of :func:`inferfleet.runtimes.vllm.argv`, with vLLM's own flag
table (:data:`inferfleet.runtimes.vllm.FLAGS`; ``--max_model_len`` is
``--max-model-len``): the model (first argument, or ``--model``) is a folder
on the host (a ``path:`` model with every file's size) or a Hub repo id (a
Hub model to resolve), ``--max-model-len`` the per-slot window (L-25),
``--max-num-seqs`` the slots, the rest as their fields; every other flag goes
to ``extra_args`` as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inferfleet.importers.llamacpp import Mapped, hub_model, model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.render.secrets import SECRET_FLAGS
from inferfleet.runtimes import vllm as vl
from inferfleet.runtimes.flags import parse_args

# vLLM's own default for --max-num-seqs (its engine arguments), written out when absent.
VLLM_MAX_NUM_SEQS = 256
MAX_FOLDER_FILES = 10_000
# vLLM's --kv-cache-dtype -> the fleet's cache type (auto: the model's dtype, f16 here).
_KV_TYPES = {"auto": "f16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def canonical_flag(spelling: str) -> str:
    name = vl.FLAGS.canonical(spelling)
    item = vl.FLAGS.field_of(name)
    if item is None or not item.takes_value:
        return name
    return item.flag


def folder_model(path_text: str, where: Where, out: Imported) -> tuple[str, dict[str, Any]] | None:
    """A model folder on this machine as a ``path:`` model, every file with its size."""
    folder = Path(path_text)
    files = []
    try:
        for item in sorted(folder.rglob("*")):
            if item.is_file() and ".cache" not in item.relative_to(folder).parts:
                files.append(
                    {"path": item.relative_to(folder).as_posix(), "size": item.stat().st_size}
                )
                if len(files) > MAX_FOLDER_FILES:
                    break
    except OSError as exc:
        out.problem(where, f"cannot list model folder {folder}: {exc.strerror}")
        return None
    if not files or len(files) > MAX_FOLDER_FILES:
        out.problem(
            where,
            f"model folder {folder} has {'no' if not files else 'too many'} files",
            "import on the machine that holds the model, or fix the path",
        )
        return None
    return model_name(folder.name), {"source": {"path": str(folder)}, "files": files}


def read_vllm(args: list[str], *, positional_model: bool, where: Where, out: Imported) -> Mapped:
    """The service fields a ``vllm serve`` argv (after ``serve``) sets."""
    mapped = Mapped()
    values: dict[str, str | None] = {}
    model: str | None = None

    def takes(flag: str) -> int | None:
        return vl.FLAGS.takes(vl.FLAGS.canonical(flag))

    for arg in parse_args(args, takes):
        if arg.flag is None:
            if positional_model and model is None and arg.index == 0:
                model = arg.value
                continue
            out.problem(where, f"unexpected word {arg.text!r}")
            continue
        key = canonical_flag(arg.flag)
        if key in SECRET_FLAGS:
            mapped.secret_names.append("VLLM_API_KEY")
            mapped.explained[key] = "a secret: not copied; vLLM reads VLLM_API_KEY (L-06)"
            out.note(where, f"{arg.flag}: value not copied; put VLLM_API_KEY=... in secrets_env")
            continue
        if vl.FLAGS.field_of(key) is None:
            end = arg.index + 1 + (0 if arg.inline or arg.value is None else 1)
            mapped.extra_args += args[arg.index : end]
            continue
        values[key] = arg.value
    model = values.pop("--model", model)
    _apply(values, model, mapped, where, out)
    return mapped


def _apply(
    values: dict[str, str | None], model: str | None, mapped: Mapped, where: Where, out: Imported
) -> None:
    fields = mapped.fields
    ex = mapped.explained
    if model is None:
        out.problem(where, "no model: vllm serve needs one")
    elif model.startswith("/"):
        mapped.model = folder_model(model, where, out)
    else:
        mapped.model = hub_model(model, None)
        out.note(
            where, f"{model}: a Hub model, to resolve with `inferfleet models manifest {model}`"
        )
    ex["--model"] = "the model, as the fleet resolves its folder"
    simple = {"--served-model-name": "alias", "--host": "bind", "--reasoning-parser":
              "reasoning_parser", "--tool-call-parser": "tool_parser",
              "--chat-template": "chat_template_file"}  # fmt: skip
    for flag, name in simple.items():
        if flag in values:
            fields[name] = values.pop(flag)
    for flag, name, kind in (
        ("--port", "port", int), ("--max-model-len", "ctx_per_slot", int),
        ("--max-num-seqs", "parallel", int), ("--tensor-parallel-size", "tensor_parallel", int),
        ("--gpu-memory-utilization", "gpu_memory_utilization", float),
    ):  # fmt: skip
        if flag in values:
            try:
                fields[name] = kind(values.pop(flag) or "")
            except ValueError:
                out.problem(where, f"{flag} is not a number")
    if "ctx_per_slot" not in fields:
        out.problem(
            where,
            "no --max-model-len: vLLM took the window from the model",
            "write the window with --max-model-len (the client contract, L-25)",
        )
    if "parallel" not in fields:
        fields["parallel"] = VLLM_MAX_NUM_SEQS
        ex["--max-num-seqs"] = f"vLLM's default ({VLLM_MAX_NUM_SEQS}), written out"
    for flag in ("--gpu-memory-utilization", "--kv-cache-dtype", "--tensor-parallel-size"):
        if flag not in fields and flag not in values:
            ex.setdefault(flag, "vLLM's default, written out")
    if "--kv-cache-dtype" in values:
        dtype = values.pop("--kv-cache-dtype") or ""
        if dtype not in _KV_TYPES:
            out.problem(where, f"--kv-cache-dtype {dtype} has no fleet cache type")
        else:
            fields["kv_cache"] = {"k": _KV_TYPES[dtype], "v": _KV_TYPES[dtype]}
    if "--enable-auto-tool-choice" in values:
        values.pop("--enable-auto-tool-choice")
        fields["client"] = {"tools": True}
    if "--default-chat-template-kwargs" in values:
        fields["chat_template_kwargs"] = json.loads(
            values.pop("--default-chat-template-kwargs") or "{}"
        )
    if values:
        out.problem(where, f"{', '.join(values)} not imported", "remove it from the command")
