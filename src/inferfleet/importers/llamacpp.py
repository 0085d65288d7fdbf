"""A ``llama-server`` command line read back into service fields, with llama.cpp's own flag table.

The inverse of :func:`inferfleet.runtimes.llamacpp.argv`: every flag the
adapter emits from a field (:data:`inferfleet.runtimes.llamacpp.FLAGS`) sets
that field; every other flag goes to ``extra_args`` as written, in order; a
secret is never copied (L-06: it becomes a ``secrets_env`` reference). What
no field can say (a partial ``-ngl``, a model URL) is a problem with the
line, so the import writes nothing rather than a service that runs something
else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers.result import Imported, Where
from inferfleet.render.secrets import SECRET_FLAGS, credential_in
from inferfleet.runtimes import llamacpp as lc
from inferfleet.runtimes.flags import FieldFlag, is_flag_word, parse_args

# -ngl at or above this puts every layer of any model llama.cpp runs on the GPUs (the
# adapter writes 999); below it is a partial offload no field expresses.
ALL_LAYERS = 99
_SPLIT_PART = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$")
_MODEL_NAME = re.compile(r"[^a-z0-9._-]+")
# Flags the adapter always writes, with the server's own default they spell out.
DEFAULTS_WRITTEN = {
    "--host": ("127.0.0.1", "llama-server's default address, written out"),
    "--cache-type-k": ("f16", "llama-server's default K cache type, written out"),
    "--cache-type-v": ("f16", "llama-server's default V cache type, written out"),
    "--flash-attn": ("auto", "llama-server's default, written out"),
}
CLOSED_ORIGINS = "closed to pages of other origins, as every server inferfleet runs (L-58)"
# Cross-origin flags the fleet owns (llama-server's; vLLM's --allowed-origins): an
# original's own CORS setting is not imported, and the rendered one is explained.
CORS_FLAGS = ("--cors-origins", "--cors-credentials", "--no-cors-credentials", "--allowed-origins")
POLICY_FLAGS = {
    "--no-kv-unified": "one KV stream per slot, so each slot owns its window (L-25)",
    "--metrics": "/metrics on, so monitoring never loses the endpoint (L-56)",
    **dict.fromkeys(CORS_FLAGS, CLOSED_ORIGINS),
}


def drop_cors(values: dict[str, str | None], mapped: Mapped, where: Where, out: Imported) -> None:
    """An original's CORS flags: not imported (the fleet renders its servers closed, L-58)."""
    for flag in CORS_FLAGS:
        if flag in values:
            values.pop(flag)
            mapped.explained[flag] = CLOSED_ORIGINS
            out.note(where, f"{flag}: not imported; {CLOSED_ORIGINS}")


def model_name(text: str) -> str:
    """A fleet name for a model file or repo: lower case, [a-z0-9._-], at most 63."""
    name = _MODEL_NAME.sub("-", text.lower()).strip("-._") or "model"
    return name[:63].rstrip("-._")


@dataclass
class Mapped:
    """Fields of one service read from its command line."""

    fields: dict[str, Any] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    model: tuple[str, dict[str, Any]] | None = None  # suggested name, block
    explained: dict[str, str] = field(default_factory=dict)
    secret_names: list[str] = field(default_factory=list)
    hub_ref: str | None = None  # a Hub model's reference as written (-hf REPO:TAG)


def local_size(path: Path) -> int:
    return path.stat().st_size


SizeOf = Callable[[Path], int]  # a file's size where the server runs; OSError when absent


def path_model(
    path_text: str, where: Where, out: Imported, size_of: SizeOf = local_size
) -> tuple[str, dict[str, Any]] | None:
    """A ``path:`` model for a GGUF where the server runs, every split part with its size."""
    path = Path(path_text)
    if not path.is_absolute():
        out.problem(
            where,
            f"model path {path_text!r} is relative (to wherever the server was started)",
            "write it as an absolute path",
        )
        return None
    split = _SPLIT_PART.match(path.name)
    names = [path.name]
    if split is not None:
        count = int(split["count"])
        names = [f"{split['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    files = []
    for name in names:
        try:
            size = size_of(path.parent / name)
        except OSError as exc:
            out.problem(
                where,
                f"cannot read the size of model file {path.parent / name}: {exc.strerror}",
                "import on the machine that holds the model files (--host names where they "
                "run), or fix the path",
            )
            return None
        files.append({"path": name, "size": size})
    block: dict[str, Any] = {"source": {"path": str(path.parent)}, "files": files}
    if names[0] != path.name:
        block["main"] = path.name
    stem = split["stem"] if split is not None else path.name.removesuffix(".gguf")
    return model_name(stem), block


def hub_model(repo: str, file: str | None) -> tuple[str, dict[str, Any]]:
    """A Hub model whose files are listed later: ``-hf`` names a repo (and a quant tag)."""
    ref, _, tag = repo.partition(":")
    name = model_name(ref.split("/")[-1] + (f"-{tag}" if tag else ""))
    block: dict[str, Any] = {
        "source": {"hub": ref, "revision": "main"},
        "manifest": f"models/{name}.manifest",
    }
    if file is not None:
        block["main"] = file
    return name, block


def _int(value: str | None, flag: str, where: Where, out: Imported, low: int = 0) -> int | None:
    try:
        number = int(value or "")
    except ValueError:
        out.problem(where, f"{flag} {value!r} is not a whole number")
        return None
    if number < low:
        out.problem(where, f"{flag} {number} is below {low}")
        return None
    return number


def _gpu_names(host: Host | None) -> dict[str, str]:
    """llama.cpp's device names on ``host`` (CUDA0, ROCm1) -> the host's device names."""
    if host is None:
        return {}
    found = {}
    for device in host.devices:
        if device.vendor != "cpu":
            found[lc.device_name(host, device.name)] = device.name
        else:
            found.setdefault("CPU", device.name)
    return found


def _devices(
    flags: dict[str, str | None], host: Host | None, host_name: str, where: Where, out: Imported
) -> list[str] | None:
    """``--device`` / ``-ngl`` as the service's devices (the adapter writes both from them)."""
    device = flags.get("--device")
    layers = flags.get("--n-gpu-layers")
    if device is None and layers is None:
        return None  # the server's own placement, and the adapter writes none
    names = _gpu_names(host)
    gpus = [n for llama, n in names.items() if llama != "CPU"]
    cpu = names.get("CPU")
    if device == "none" or layers == "0":
        return [cpu] if cpu is not None else []
    if layers is not None and layers not in ("all", "auto", "-1"):
        count = _int(layers, "--n-gpu-layers", where, out)
        if count is not None and count < ALL_LAYERS:
            out.problem(
                where,
                f"-ngl {count} offloads part of the model; a service's devices take every "
                "layer (-ngl 999)",
                "place tensors with tensor_overrides instead, then import the rest",
            )
            return None
    if device is not None:
        picked = []
        for word in device.split(","):
            if word not in names or word == "CPU":
                out.problem(
                    where,
                    f"--device {word} is not a GPU of host {host_name!r}",
                    f"declare it under hosts.{host_name}.devices (known: "
                    f"{', '.join(n for n in names if n != 'CPU') or 'none'})",
                )
                return None
            picked.append(names[word])
        return picked
    if not gpus:
        out.problem(
            where,
            f"the server puts layers on a GPU (-ngl {layers}) but host {host_name!r} declares "
            "no GPU devices",
            f"declare them under hosts.{host_name}.devices in the fleet file you import into "
            "(`inferfleet doctor` lists them), then import again",
        )
        return None
    return gpus


def _overrides(
    value: str, host: Host | None, host_name: str, where: Where, out: Imported
) -> list[dict[str, str]]:
    names = _gpu_names(host)
    found = []
    for item in value.split(","):
        pattern, eq, target = item.rpartition("=")
        if not eq or not pattern:
            out.problem(where, f"--override-tensor item {item!r} is not PATTERN=DEVICE")
            continue
        if target == "CPU":
            found.append({"pattern": pattern, "device": "CPU"})
        elif target in names:
            found.append({"pattern": pattern, "device": names[target]})
        else:
            out.problem(
                where,
                f"--override-tensor target {target!r} is not a device of host {host_name!r}",
                f"declare it under hosts.{host_name}.devices",
            )
    return found


def read_llama_server(
    args: list[str],
    *,
    host: Host | None,
    host_name: str,
    where: Where,
    out: Imported,
    size_of: SizeOf = local_size,
) -> Mapped:
    """The service fields a ``llama-server`` argv (after the binary) sets."""
    mapped = Mapped()
    values: dict[str, str | None] = {}  # canonical field flag -> value (the last one wins)
    for arg in parse_args(args, lc.FLAGS.takes):
        if arg.flag is None:
            out.problem(where, f"unexpected word {arg.text!r}: llama-server takes no positionals")
            continue
        item: FieldFlag | None = lc.FLAGS.field_of(arg.flag)
        if arg.flag in SECRET_FLAGS or (item is not None and item.field == "secrets_env"):
            _secret(arg.flag, mapped, where, out)
            continue
        if item is None:
            if arg.value is not None and credential_in(arg.value) is not None:
                out.problem(
                    where,
                    f"{arg.flag} carries a credential",
                    "move it to an env file the server reads (secrets_env), then import",
                )
                continue
            words = args[arg.index : arg.index + 1 + (0 if arg.inline or arg.value is None else 1)]
            mapped.extra_args += words
            continue
        if item.takes_value and (arg.value is None or is_flag_word(arg.value)):
            out.problem(
                where,
                f"{arg.flag} takes a value, but {arg.value or 'nothing'} follows it",
                f"write {arg.flag} VALUE ({lc.FLAGS.program} reads the next word as its value)",
            )
            continue
        values[_canonical(item, arg.flag)] = arg.value
    _apply(values, mapped, host, host_name, where, out, size_of)
    return mapped


# The spellings of a field flag that mean something else than its first spelling.
_DISTINCT = {
    "-m": "--model", "--model": "--model", "-hf": "--hf-repo", "-hfr": "--hf-repo",
    "--hf-repo": "--hf-repo", "-hff": "--hf-file", "--hf-file": "--hf-file",
    "-mu": "--model-url", "--model-url": "--model-url", "-dr": "--docker-repo",
    "--docker-repo": "--docker-repo", "-mm": "--mmproj", "--mmproj": "--mmproj",
    "-mmu": "--mmproj-url", "--mmproj-url": "--mmproj-url", "-no-kvu": "--no-kv-unified",
    "--no-kv-unified": "--no-kv-unified", "-kvu": "--kv-unified", "--kv-unified": "--kv-unified",
    "--kv-unified-per-slot": "--kv-unified-per-slot", "--jinja": "--jinja",
    "--no-jinja": "--no-jinja", "--chat-template": "--chat-template",
    "--chat-template-file": "--chat-template-file", "-cmoe": "--cpu-moe",
    "--cpu-moe": "--cpu-moe", "--no-mmproj": "--no-mmproj", "--mmproj-auto": "--mmproj-auto",
    "--no-mmproj-auto": "--no-mmproj-auto",
}  # fmt: skip


def _canonical(item: FieldFlag, spelling: str) -> str:
    """One spelling per meaning: -c and --ctx-size are one, -hf and -m are not."""
    return _DISTINCT.get(spelling, item.flag)


def canonical_flag(spelling: str) -> str:
    """The spelling compare.py keys a llama-server flag by."""
    item = lc.FLAGS.field_of(spelling)
    return spelling if item is None else _canonical(item, spelling)


def _secret(flag: str, mapped: Mapped, where: Where, out: Imported) -> None:
    env = {"--api-key": "LLAMA_API_KEY", "--api-key-file": "LLAMA_API_KEY_FILE"}.get(
        flag, "HF_TOKEN" if "hf" in flag else "LLAMA_API_KEY"
    )
    mapped.secret_names.append(env)
    mapped.explained[canonical_flag(flag)] = (
        f"a secret: not copied; the server reads {env} from its secrets_env file (L-06)"
    )
    out.note(where, f"{flag}: value not copied; put {env}=... in the service's secrets_env file")


def _apply(
    values: dict[str, str | None],
    mapped: Mapped,
    host: Host | None,
    host_name: str,
    where: Where,
    out: Imported,
    size_of: SizeOf,
) -> None:
    fields = mapped.fields
    ex = mapped.explained
    drop_cors(values, mapped, where, out)
    for flag in ("--model-url", "--docker-repo", "--mmproj-url", "--kv-unified-per-slot"):
        if flag in values:
            out.problem(where, f"{flag} has no equivalent in a fleet file", _NO_FIELD_HINT)
    for flag in ("--cpu-moe", "--n-cpu-moe", "--chat-template", "--kv-unified"):
        if flag in values:
            out.problem(where, f"{flag} has no equivalent in a fleet file", _FIELD_HINT[flag])
    if "--model" in values:
        mapped.model = path_model(values["--model"] or "", where, out, size_of)
    elif "--hf-repo" in values:
        ref = values["--hf-repo"] or ""
        mapped.model = hub_model(ref, values.get("--hf-file"))
        hff = values.get("--hf-file")
        mapped.hub_ref = f"{ref.partition(':')[0]}:{hff}" if hff else ref
        ex["--hf-repo"] = "a Hub model: the fleet fetches and verifies its file, then --model"
        ex["--hf-file"] = ex["--hf-repo"]
        ex["--model"] = ex["--hf-repo"]
    else:
        out.problem(where, "no model: the command has neither -m nor -hf")
    if "--alias" in values:
        fields["alias"] = values["--alias"]
    if "--host" in values:
        fields["bind"] = values["--host"]
    if "--port" in values:
        port = _int(values["--port"], "--port", where, out, low=1)
        if port is not None:
            fields["port"] = port
    parallel = 1
    if "--parallel" in values:
        parallel = _int(values["--parallel"], "--parallel", where, out, low=1) or 1
        fields["parallel"] = parallel
    else:
        ex["--parallel"] = "one slot written out (the server's default picks a count itself)"
    if "--ctx-size" in values:
        total = _int(values["--ctx-size"], "--ctx-size", where, out)
        if total == 0:
            out.problem(where, "-c 0 takes the window from the model", _CTX_HINT)
        elif total is not None and total % parallel:
            out.problem(
                where,
                f"-c {total} is not a multiple of --parallel {parallel}: the per-slot window "
                "(the client contract, L-25) would not be a whole number",
                "give -c as the per-slot window times the slots",
            )
        elif total is not None:
            fields["ctx_per_slot"] = total // parallel
    else:
        out.problem(where, "no -c: the server took the window from the model", _CTX_HINT)
    cache = {
        k: values[f] for k, f in (("k", "--cache-type-k"), ("v", "--cache-type-v")) if f in values
    }
    if cache:
        fields["kv_cache"] = cache
    if "--flash-attn" in values:
        fields["flash_attn"] = values["--flash-attn"]
    devices = _devices(values, host, host_name, where, out)
    if devices is not None:
        fields["devices"] = devices
        ex["--n-gpu-layers"] = "every layer on the service's devices (the adapter writes -ngl 999)"
        ex["--device"] = "the service's devices, by llama.cpp's names"
    if "--split-mode" in values:
        fields["split_mode"] = values["--split-mode"]
    if "--tensor-split" in values:
        try:
            fields["tensor_split"] = [float(x) for x in (values["--tensor-split"] or "").split(",")]
        except ValueError:
            out.problem(where, f"--tensor-split {values['--tensor-split']!r} is not numbers")
    if "--override-tensor" in values:
        fields["tensor_overrides"] = _overrides(
            values["--override-tensor"] or "", host, host_name, where, out
        )
    if "--mmproj" in values:
        _mmproj(values["--mmproj"] or "", mapped, where, out, size_of)
    if "--jinja" in values or "--no-jinja" in values:
        fields["jinja"] = "--jinja" in values
    if "--chat-template-file" in values:
        fields["chat_template_file"] = values["--chat-template-file"]
    if "--chat-template-kwargs" in values:
        try:
            kwargs = json.loads(values["--chat-template-kwargs"] or "")
        except ValueError:
            kwargs = None
        if not isinstance(kwargs, dict):
            out.problem(where, "--chat-template-kwargs is not a JSON object")
        else:
            fields["chat_template_kwargs"] = kwargs
    spec = [f for f in values if f.startswith(("--spec-", "--draft"))]
    if spec:
        out.problem(
            where,
            f"speculative flags ({', '.join(spec)}) are not imported",
            "write the service's speculative block by hand (L-13), without them in cmd",
        )
    left = [f for f in values if f not in _READ and f not in spec]
    if left:
        out.problem(where, f"{', '.join(left)} not imported", "remove it from cmd")


def _mmproj(path_text: str, mapped: Mapped, where: Where, out: Imported, size_of: SizeOf) -> None:
    """A projector next to the model's file joins the model's files (L-22)."""
    path = Path(path_text)
    model = mapped.model[1] if mapped.model is not None else {}
    folder = model.get("source", {}).get("path")
    if folder is None or str(path.parent) != folder:
        out.problem(
            where,
            f"--mmproj {path_text} is not in the model's folder",
            "a service's projector is a file of its model: put it next to the GGUF",
        )
        return
    try:
        size = size_of(path)
    except OSError as exc:
        out.problem(where, f"cannot read the size of {path}: {exc.strerror}")
        return
    model["files"].append({"path": path.name, "size": size})
    mapped.fields["mmproj"] = path.name


# Every canonical flag _apply reads or refuses.
_READ = frozenset(
    {"--model", "--hf-repo", "--hf-file", "--alias", "--host", "--port", "--parallel",
     "--ctx-size", "--cache-type-k", "--cache-type-v", "--flash-attn", "--metrics", "--device",
     "--n-gpu-layers", "--split-mode", "--tensor-split", "--override-tensor", "--mmproj",
     "--jinja", "--no-jinja", "--chat-template-file", "--chat-template-kwargs",
     "--no-kv-unified", "--model-url", "--docker-repo", "--mmproj-url", "--kv-unified-per-slot",
     "--cpu-moe", "--n-cpu-moe", "--chat-template", "--kv-unified"}
)  # fmt: skip
_CTX_HINT = (
    "write the window with -c (per-slot window x --parallel): the fleet states every "
    "service's window (L-25)"
)
_NO_FIELD_HINT = "give the model as a local file (-m) or a Hub repo (-hf)"
_FIELD_HINT = {
    "--cpu-moe": "write the expert placement as --override-tensor PATTERN=CPU",
    "--n-cpu-moe": "write the expert placement as --override-tensor PATTERN=CPU",
    "--chat-template": "a built-in template name: use --chat-template-file with the template",
    "--kv-unified": "one pool shared by every slot breaks the per-slot window (L-25); drop it",
}
