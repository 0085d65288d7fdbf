"""``inferfleet gguf``: read GGUF headers without touching tensor data.

``inspect`` prints what a loader will see: architecture, layers, attention
layout (sliding window, nextn/MTP, recurrent layers), tensor type histogram
(unknown ids by number, L-10), KV bytes per token (L-29) and, for a split
GGUF, every part (L-04). Names from the file are escaped before printing.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Final, Literal

import typer

from inferfleet.documents import (
    ChatTemplateInfo,
    Experts,
    GGUFInspectDocument,
    KVContext,
    KVPerTokenBytes,
    KVSizing,
    LayerBytes,
    MetadataValue,
    SplitInfo,
    SplitPart,
    TensorRow,
    TokenizerInfo,
    TypeCount,
    document_of,
)
from inferfleet.errors import UsageError
from inferfleet.gguf import GGUFError, Inspection, SkippedArray, inspect
from inferfleet.gguf.model import json_value
from inferfleet.output import Output, esc, visible

SCHEMA: Final[Literal["inferfleet.gguf.inspect/v1"]] = "inferfleet.gguf.inspect/v1"

app = typer.Typer(
    help="Read GGUF headers (metadata and tensor infos; never tensor data).",
    no_args_is_help=True,
)


@app.callback()
def _group() -> None:
    """Read GGUF headers (metadata and tensor infos; never tensor data)."""


MAX_SHOWN_KEYS = 500  # metadata rows in the human table; real models have 30-60


def show(value: object, limit: int = 120) -> str:
    """Text from a file, safe for the terminal: control characters (escape
    sequences) made visible, rich markup escaped, long values shortened."""
    if value is None:
        return "-"
    text = visible(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return esc(text)


def mib(n: int | None) -> str:
    if n is None:
        return "unknown"
    if n >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    return f"{n / (1 << 20):.2f} MiB"


def _meta_text(value: object) -> str:
    if isinstance(value, SkippedArray):
        return f"[{value.element_type} × {value.count:,}] (not loaded)"
    if isinstance(value, tuple):
        inner = ", ".join(_meta_text(v) for v in value[:16])
        more = f", … {len(value) - 16} more" if len(value) > 16 else ""
        return f"[{inner}{more}]"
    return str(value)


def _layers_text(layers: tuple[int, ...]) -> str:
    return ", ".join(map(str, layers)) if layers else "none"


def _per_layer(value: int | tuple[int, ...] | None) -> int | list[int] | None:
    """A head count is one number, or one per layer (a JSON array)."""
    return list(value) if isinstance(value, tuple) else value


def total_ctx(per_slot: int | None, total: int | None, parallel: int) -> int | None:
    """The total window (-c) from ``--ctx`` (per slot, as everywhere else) or ``--ctx-total``.

    Per slot and total are the distinction L-25 is about: one option never means both.
    """
    if per_slot is not None and total is not None:
        raise UsageError(
            "--ctx and --ctx-total both given",
            hint="--ctx is the window per slot, --ctx-total the -c the slots share: give one",
        )
    if total is not None and total < parallel:
        raise UsageError(
            f"--ctx-total {total} leaves no window for {parallel} slots",
            hint="give at least one token per slot, or fewer --parallel",
        )
    return total if per_slot is None else per_slot * parallel


def payload(
    result: Inspection,
    *,
    with_tensors: bool,
    ctx: int | None,
    parallel: int,
    cache_type_k: str,
    cache_type_v: str,
) -> GGUFInspectDocument:
    """The ``inferfleet.gguf.inspect/v1`` document."""
    per_token = result.kv_bytes_per_token(cache_type_k, cache_type_v)
    kv: KVSizing | None = None
    if per_token is not None:
        kv = KVSizing(
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
            per_token=KVPerTokenBytes(
                full=per_token.full, swa=per_token.swa, nextn=per_token.nextn
            ),
        )
        estimate = (
            None
            if ctx is None
            else result.kv_bytes(
                ctx, parallel=parallel, cache_type_k=cache_type_k, cache_type_v=cache_type_v
            )
        )
        if estimate is not None and ctx is not None:
            kv["context"] = document_of(KVContext, estimate, ctx=ctx, parallel=parallel)
    doc = document_of(
        GGUFInspectDocument,
        result,
        schema=SCHEMA,
        parameters=result.parameter_count,
        tensor_count=len(result.tensors),
        head_count=_per_layer(result.head_count),
        head_count_kv=_per_layer(result.head_count_kv),
        experts=Experts(count=result.expert_count, used=result.expert_used_count),
        chat_template=ChatTemplateInfo(
            present=result.chat_template_length is not None,
            length=result.chat_template_length,
            named=list(result.named_chat_templates),
        ),
        tokenizer=TokenizerInfo(model=result.tokenizer_model, vocab_size=result.vocab_size),
        kv=kv,
        types=[
            TypeCount(id=s.type_id, name=s.name, count=s.count, bytes=s.n_bytes, known=s.known)
            for s in result.type_histogram
        ],
        layers=[LayerBytes(layer=k, bytes=v) for k, v in result.layer_bytes().items()],
        split=None
        if result.split_count is None
        else SplitInfo(
            count=result.split_count,
            parts=[document_of(SplitPart, p, number=p.split_no) for p in result.parts],
        ),
        metadata={
            key: MetadataValue(type=result.value_types.get(key), value=json_value(value))
            for key, value in result.metadata.items()
        },
    )
    if with_tensors:
        doc["tensors"] = [
            document_of(TensorRow, t, type=t.type_name, elements=t.n_elements, bytes=t.n_bytes)
            for t in result.tensors
        ]
    return doc


def _human(out: Output, result: Inspection, doc: GGUFInspectDocument, with_tensors: bool) -> None:
    heads = f"{show(_meta_text(result.head_count))} / {show(_meta_text(result.head_count_kv))}"
    template = result.chat_template_length
    rows = [
        ["file", show(result.location, 200)],
        ["architecture", show(result.architecture)],
        ["name", show(result.name)],
        ["file type", show(result.file_type)],
        ["GGUF version", str(result.version)],
        ["parameters", f"{result.parameter_count:,}"],
        ["tensors", f"{len(result.tensors):,} ({mib(result.tensor_bytes)})"],
        ["trained context", show(result.context_length)],
        ["layers", f"{show(result.block_count)} (nextn/MTP: {result.nextn_layers})"],
        ["heads / KV heads", heads],
        ["head dim K / V", f"{show(result.key_length)} / {show(result.value_length)}"],
        ["sliding window", show(result.sliding_window or "none")],
        ["SWA layers", _layers_text(result.swa_layers)],
        ["full-attention layers", _layers_text(result.full_attention_layers)],
        ["recurrent layers", _layers_text(result.recurrent_layers)],
        ["experts (used)", f"{show(result.expert_count)} ({show(result.expert_used_count)})"],
        ["chat template", "none" if template is None else f"{template:,} characters"],
        ["tokenizer", f"{show(result.tokenizer_model)}, vocabulary {show(result.vocab_size)}"],
    ]
    kv = doc["kv"]
    if kv is not None:
        per = kv["per_token"]
        rows.append(
            [
                f"KV/token ({kv['cache_type_k']}/{kv['cache_type_v']})",
                f"{per['full']:,} B full + {per['swa']:,} B SWA (capped at the window)",
            ]
        )
        if "context" in kv:
            c = kv["context"]
            rows.append(
                [
                    f"KV at -c {c['ctx']} --parallel {c['parallel']}",
                    f"{mib(c['total_bytes'])} ({c['streams']} x {c['cells_full']} cells full, "
                    f"{c['streams']} x {c['cells_swa']} cells SWA)",
                ]
            )
    out.table("model", ["", ""], rows)
    out.table(
        "tensor types",
        ["type", "count", "bytes"],
        [[show(s.name), str(s.count), mib(s.n_bytes)] for s in result.type_histogram],
    )
    layer_bytes = result.layer_bytes()
    if layer_bytes and not with_tensors:
        sizes = list(layer_bytes.values())
        out.line(
            f"per layer: {len(sizes)} blocks, {mib(min(sizes))} .. {mib(max(sizes))} "
            "(--tensors lists every layer and tensor)"
        )
    if result.split_count is not None:
        out.table(
            f"split GGUF: {result.split_count} parts",
            ["part", "file", "tensors", "bytes"],
            [
                [show(p.split_no), show(p.source, 200), str(p.tensor_count), mib(p.tensor_bytes)]
                for p in result.parts
            ],
        )
    if with_tensors:
        out.table(
            "bytes per layer",
            ["layer", "bytes"],
            [[str(k), mib(v)] for k, v in layer_bytes.items()],
        )
        out.table(
            "tensors",
            ["name", "shape", "type", "bytes"],
            [
                [show(t.name), show(list(t.shape)), show(t.type_name), mib(t.n_bytes)]
                for t in result.tensors
            ],
        )
    # A hostile header may carry 200,000 keys: a terminal table of them takes a minute
    # and shows nothing useful. The first ones are shown, --json carries them all.
    shown = list(itertools.islice(result.metadata.items(), MAX_SHOWN_KEYS))
    out.table(
        "metadata",
        ["key", "type", "value"],
        [[show(k), show(result.value_types.get(k)), show(_meta_text(v))] for k, v in shown],
    )
    hidden = len(result.metadata) - len(shown)
    if hidden > 0:
        out.line(f"… {hidden:,} more metadata keys (--json lists every one)")
    for note in result.notes:
        out.line(f"[yellow]note:[/] {show(note, 400)}")
    for problem in result.problems:
        out.line(f"[red]problem:[/] {show(problem, 400)}")


@app.command("inspect")
def inspect_cmd(
    path_or_url: Annotated[
        str,
        typer.Argument(
            help="A .gguf file, a folder (its GGUF; part 1 of a split), an http(s) URL, or a "
            "Hub repo's file: REPO, REPO:FILE, REPO:TAG (e.g. Q4_K_M), hf://REPO/FILE, each "
            "with an optional @REVISION. Read from the Hugging Face cache when it is there "
            "(HF_HUB_OFFLINE: only from there)."
        ),
    ],
    json_mode: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
    tensors: Annotated[bool, typer.Option("--tensors", help="List every tensor.")] = False,
    ctx: Annotated[
        int | None,
        typer.Option(
            "--ctx", min=1, help="Also size the KV cache for this window per slot (L-25)."
        ),
    ] = None,
    ctx_total: Annotated[
        int | None,
        typer.Option(
            "--ctx-total", min=1, help="... or for this total -c, shared by the slots (L-25)."
        ),
    ] = None,
    parallel: Annotated[int, typer.Option("--parallel", min=1, help="Slots (-np).")] = 1,
    cache_type_k: Annotated[str, typer.Option("--cache-type-k", help="-ctk type.")] = "f16",
    cache_type_v: Annotated[str, typer.Option("--cache-type-v", help="-ctv type.")] = "f16",
    offline: Annotated[
        bool, typer.Option("--offline", help="No network request (as HF_HUB_OFFLINE=1).")
    ] = False,
) -> None:
    """Show what a GGUF's header says. Exits 1 when the file has problems
    (a truncated download, offsets a loader refuses); HF_TOKEN is sent to
    Hugging Face URLs only."""
    from inferfleet.gguf.source import is_url
    from inferfleet.hub.errors import HubError
    from inferfleet.hub.fetch_plan import endpoint
    from inferfleet.hub.model_ref import gguf_location
    from inferfleet.hub.reach import unreachable
    from inferfleet.io.offline import offline_mode

    out = Output(json_mode=json_mode)
    total = total_ctx(ctx, ctx_total, parallel)
    with offline_mode(offline):
        location = gguf_location(path_or_url, endpoint=endpoint(None))
    if is_url(location) and (why := unreachable(location)) is not None:
        raise HubError(
            why, hint="check the network and HF_ENDPOINT, or use --offline", where=location
        )
    result = inspect(location)
    try:
        doc = payload(
            result,
            with_tensors=tensors,
            ctx=total,
            parallel=parallel,
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
        )
    except GGUFError:
        raise
    except ValueError as exc:  # an unknown cache type name
        raise UsageError(str(exc), hint="use a ggml type name such as f16, q8_0, q4_0") from None
    if json_mode:
        out.emit(doc)
    else:
        _human(out, result, doc, tensors)
    if result.problems:
        raise typer.Exit(code=1)
