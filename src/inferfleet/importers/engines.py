"""vLLM and SGLang command lines read back into service fields, with their own flag tables.

The inverse of :func:`inferfleet.runtimes.vllm.argv` and
:func:`inferfleet.runtimes.sglang.argv`: the model (``vllm serve``'s first
argument, ``--model``, SGLang's ``--model-path``) is a folder on the host (a
``path:`` model with every file's size) or a Hub repo id (a Hub model to
list), the window flag the per-slot window (L-25), the sequences flag the
slots, the rest as their fields; every other flag goes to ``extra_args`` as
written. vLLM reads ``--max_model_len`` as ``--max-model-len``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfleet.importers.commandline import Program
from inferfleet.importers.llamacpp import Mapped, drop_cors, hub_model, model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.render.secrets import SECRET_FLAGS
from inferfleet.runtimes import sglang as sg
from inferfleet.runtimes import vllm as vl
from inferfleet.runtimes.flags import FlagTable, parse_args

# vLLM's own default for --max-num-seqs (its engine arguments), written out when absent.
VLLM_MAX_NUM_SEQS = 256
MAX_FOLDER_FILES = 10_000
# vLLM's --kv-cache-dtype -> the fleet's cache type (auto: the model's dtype, f16 here).
_KV_TYPES = {"auto": "f16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


@dataclass(frozen=True)
class Engine:
    """How one engine's flags map to service fields."""

    table: FlagTable
    name: str  # in messages
    text: dict[str, str]  # flag -> field, a string value
    numbers: dict[str, tuple[str, type]]  # flag -> field, int or float
    window: str  # the per-slot window's flag (L-25)
    slots: str  # the slots' flag
    default_slots: int | None  # the engine's own default, written out; None: it decides itself
    api_key_env: str
    default_host: str | None  # where it listens without --host; None: every address


ENGINES = {
    "vllm": Engine(
        vl.FLAGS, "vLLM",
        {"--served-model-name": "alias", "--host": "bind", "--reasoning-parser":
         "reasoning_parser", "--tool-call-parser": "tool_parser",
         "--chat-template": "chat_template_file"},
        {"--port": ("port", int), "--max-model-len": ("ctx_per_slot", int),
         "--max-num-seqs": ("parallel", int), "--tensor-parallel-size": ("tensor_parallel", int),
         "--gpu-memory-utilization": ("gpu_memory_utilization", float)},
        "--max-model-len", "--max-num-seqs", VLLM_MAX_NUM_SEQS, "VLLM_API_KEY", None,
    ),
    "sglang": Engine(
        sg.FLAGS, "SGLang",
        {"--served-model-name": "alias", "--host": "bind", "--reasoning-parser":
         "reasoning_parser", "--chat-template": "chat_template_file"},
        {"--port": ("port", int), "--context-length": ("ctx_per_slot", int),
         "--max-running-requests": ("parallel", int), "--tp-size": ("tensor_parallel", int),
         "--mem-fraction-static": ("gpu_memory_utilization", float)},
        "--context-length", "--max-running-requests", None, "SGLANG_API_KEY", "127.0.0.1",
    ),
}  # fmt: skip


def canonical_flag(spelling: str, kind: str = "vllm") -> str:
    table = ENGINES[kind].table
    name = table.canonical(spelling)
    item = table.field_of(name)
    if item is None or not item.takes_value:
        return name
    return item.flag


FilesOf = Callable[[Path], list[tuple[str, int]]]
"""A model folder's files (relative path, size) where the server runs; OSError when unreadable."""


def local_files(folder: Path) -> list[tuple[str, int]]:
    """A folder's files on this machine (at most one more than MAX_FOLDER_FILES)."""
    files = []
    for item in sorted(folder.rglob("*")):
        if item.is_file() and ".cache" not in item.relative_to(folder).parts:
            files.append((item.relative_to(folder).as_posix(), item.stat().st_size))
            if len(files) > MAX_FOLDER_FILES:
                break
    return files


def folder_model(
    path_text: str, where: Where, out: Imported, files_of: FilesOf = local_files
) -> tuple[str, dict[str, Any]] | None:
    """A model folder where the server runs as a ``path:`` model, every file with its size."""
    folder = Path(path_text)
    try:
        found = files_of(folder)
    except OSError as exc:
        out.problem(where, f"cannot list model folder {folder}: {exc.strerror}")
        return None
    if not found or len(found) > MAX_FOLDER_FILES:
        out.problem(
            where,
            f"model folder {folder} has {'no' if not found else 'too many'} files",
            "import on the machine that holds the model, or fix the path",
        )
        return None
    files = [{"path": name, "size": size} for name, size in found]
    return model_name(folder.name), {"source": {"path": str(folder)}, "files": files}


def read_engine(
    program: Program, *, where: Where, out: Imported, files_of: FilesOf = local_files
) -> Mapped:
    """The service fields a vLLM or SGLang command line sets (``vllm serve`` takes the model
    as its first argument)."""
    engine = ENGINES[program.kind]
    args = program.args
    positional_model = program.program[-1] == "serve"
    mapped = Mapped()
    values: dict[str, str | None] = {}
    model: str | None = None

    def takes(flag: str) -> int | None:
        return engine.table.takes(engine.table.canonical(flag))

    for arg in parse_args(args, takes):
        if arg.flag is None:
            if positional_model and model is None and arg.index == 0:
                model = arg.value
                continue
            out.problem(where, f"unexpected word {arg.text!r}")
            continue
        key = canonical_flag(arg.flag, program.kind)
        if key in SECRET_FLAGS:
            env = engine.api_key_env
            mapped.secret_names.append(env)
            mapped.explained[key] = f"a secret: not copied; the server reads {env} (L-06)"
            out.note(where, f"{arg.flag}: value not copied; put {env}=... in secrets_env")
            continue
        if engine.table.field_of(key) is None:
            end = arg.index + 1 + (0 if arg.inline or arg.value is None else 1)
            mapped.extra_args += args[arg.index : end]
            continue
        values[key] = arg.value
    model = values.pop("--model", values.pop("--model-path", model))
    drop_cors(values, mapped, where, out)
    if model is None:
        out.problem(where, f"no model: {engine.name} needs one")
    elif model.startswith("/"):
        mapped.model = folder_model(model, where, out, files_of)
    else:
        mapped.model = hub_model(model, None)
        mapped.hub_ref = model
    mapped.explained["--model"] = "the model, as the fleet resolves its folder"
    mapped.explained["--model-path"] = mapped.explained["--model"]
    _apply(engine, values, mapped, where, out)
    return mapped


def _apply(
    engine: Engine, values: dict[str, str | None], mapped: Mapped, where: Where, out: Imported
) -> None:
    """The service fields of the flags other than the model's."""
    fields = mapped.fields
    ex = mapped.explained
    for flag, name in engine.text.items():
        if flag in values:
            fields[name] = values.pop(flag)
    for flag, (name, kind) in engine.numbers.items():
        if flag in values:
            try:
                fields[name] = kind(values.pop(flag) or "")
            except ValueError:
                out.problem(where, f"{flag} is not a number")
    if "parallel" not in fields and engine.default_slots is not None:
        fields["parallel"] = engine.default_slots
        ex[engine.slots] = f"{engine.name}'s default ({engine.default_slots}), written out"
    # The fleet states every service's window (the client contract, L-25) and slots.
    for name, flag, lack, hint in (
        ("ctx_per_slot", engine.window, "took the window from the model",
         f"write the window with {engine.window} (the client contract, L-25)"),
        ("parallel", engine.slots, "picks the slots itself",
         f"write them with {engine.slots} (the fleet states every service's slots)"),
    ):  # fmt: skip
        if name not in fields:
            out.problem(where, f"no {flag}: {engine.name} {lack}", hint)
    if "bind" not in fields and engine.default_host is not None:
        ex["--host"] = f"{engine.name}'s default ({engine.default_host}), written out"
    elif "bind" not in fields:
        # Servers stay closed unless the fleet says who reaches them and why (L-58).
        ex["--host"] = "kept on loopback until the service's exposure says why (L-58)"
    for flag, (name, _) in engine.numbers.items():
        if name not in fields:
            ex.setdefault(flag, f"{engine.name}'s default, written out")
    ex.setdefault("--kv-cache-dtype", f"{engine.name}'s default, written out")
    if "--enable-metrics" in values:
        values.pop("--enable-metrics")
    elif engine.table is sg.FLAGS:
        ex["--enable-metrics"] = "/metrics on, so monitoring never loses the endpoint (L-56)"
    if "--enable-multimodal" in values:
        values.pop("--enable-multimodal")
        fields.setdefault("client", {})["input"] = ["text", "image"]
    if engine.table is sg.FLAGS and "--tool-call-parser" in values:
        fields["tool_parser"] = values.pop("--tool-call-parser")
        fields.setdefault("client", {})["tools"] = True
    if "--kv-cache-dtype" in values:
        dtype = values.pop("--kv-cache-dtype") or ""
        if dtype not in _KV_TYPES:
            out.problem(where, f"--kv-cache-dtype {dtype} has no fleet cache type")
        else:
            fields["kv_cache"] = {"k": _KV_TYPES[dtype], "v": _KV_TYPES[dtype]}
    if "--enable-auto-tool-choice" in values:
        values.pop("--enable-auto-tool-choice")
        fields.setdefault("client", {})["tools"] = True
    if "--default-chat-template-kwargs" in values:
        fields["chat_template_kwargs"] = json.loads(
            values.pop("--default-chat-template-kwargs") or "{}"
        )
    if values:
        out.problem(where, f"{', '.join(values)} not imported", "remove it from the command")
