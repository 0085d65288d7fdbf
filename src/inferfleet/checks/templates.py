"""Chat template, jinja and vision rules (L-18, L-19, L-22)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.runtimes.llamacpp import wants_jinja
from inferfleet.runtimes.registry import traits


@rule(
    "jinja-off-with-tools",
    "L-18",
    "error",
    "tools or chat-template kwargs without jinja are ignored or answer 500",
)
def jinja_off(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf:
            continue
        uses = []
        if service.client.tools:
            uses.append("tools")
        if service.chat_template_kwargs:
            uses.append("chat_template_kwargs")
        disabled = wants_jinja(service) is False or "--no-jinja" in service.extra_args
        if uses and disabled:
            yield Hit(
                name,
                f"services.{name}.jinja",
                f"service {name!r} uses {' and '.join(uses)} with jinja off",
                "remove `jinja: false` (and --no-jinja): the renderer passes --jinja for them",
            )


@rule(
    "chat-template-missing",
    "L-19",
    "error",
    "chat clients on a file without a usable chat template and no template file",
    header=True,
)
def template_missing(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or not service.client.chat:
            continue
        if service.chat_template_file is not None or service.model is None:
            continue
        facts = ctx.header(service.model)
        if isinstance(facts, str):
            yield Skip(name, facts)
        elif not facts.chat_template_length:
            yield Hit(
                name,
                f"services.{name}.client.chat",
                f"model {service.model!r} of service {name!r} has no chat template, so the "
                "server falls back to a built-in one (a 250-token request became 73,600)",
                "set chat_template_file to the template the model needs, or client.chat: "
                "false for a completion-only (base) model",
            )


@rule(
    "chat-template-file-missing",
    "L-19",
    "error",
    "the chat template file named in the fleet is not in the repository",
)
def template_file_missing(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        path = service.chat_template_file
        if path is not None and not (ctx.root / path).is_file():
            yield Hit(
                name,
                f"services.{name}.chat_template_file",
                f"chat template file {path!r} of service {name!r} does not exist next to "
                "the fleet file",
                "commit the template (path relative to fleet.yaml); hosts read it from their "
                "checkout",
            )


@rule(
    "vision-without-mmproj",
    "L-22",
    "error",
    "image input on llama.cpp without --mmproj comes up healthy and text-only",
)
def vision_projector(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if traits(runtime.kind).gguf and "image" in service.client.input and not service.mmproj:
            yield Hit(
                name,
                f"services.{name}.client.input",
                f"service {name!r} promises image input but has no mmproj",
                "declare the projector GGUF as a file of the model and set mmproj to it",
            )


@rule(
    "mmproj-without-image-input",
    "L-22",
    "warning",
    "a projector is loaded but clients are not told the endpoint takes images",
)
def projector_unadvertised(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        if service.mmproj and "image" not in service.client.input:
            yield Hit(
                name,
                f"services.{name}.client.input",
                f"service {name!r} loads projector {service.mmproj!r} but client.input has "
                "no image",
                "add image to client.input (client configs advertise it), or drop mmproj to "
                "save its memory (~1.5x its file size, L-28)",
            )
