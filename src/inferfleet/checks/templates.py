"""Chat template, jinja and vision rules (L-18, L-19, L-22)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.bounded import tree_path_problem
from inferfleet.checks.engine import Hit, Subject, header_rule, service_rule
from inferfleet.gguf import Inspection
from inferfleet.runtimes.llamacpp import wants_jinja


@service_rule("jinja-off-with-tools", "L-18", "error", services="gguf")
def jinja_off(s: Subject) -> Iterator[Hit]:
    """tools or chat-template kwargs without jinja are ignored or answer 500"""
    service = s.service
    uses = []
    if service.client.tools:
        uses.append("tools")
    if service.chat_template_kwargs:
        uses.append("chat_template_kwargs")
    disabled = wants_jinja(service) is False or any(a.flag == "--no-jinja" for a in s.extra_args)
    if uses and disabled:
        yield s.hit(
            "jinja",
            f"service {s.name!r} uses {' and '.join(uses)} with jinja off",
            "remove `jinja: false` (and --no-jinja): the renderer passes --jinja for them",
        )


def _chat_without_template_file(s: Subject) -> str | None:
    """The model of a chat service that relies on the file's own template."""
    service = s.service
    return service.model if service.client.chat and service.chat_template_file is None else None


@header_rule("chat-template-missing", "L-19", "error", model=_chat_without_template_file)
def template_missing(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """chat clients on a file without a usable chat template and no template file"""
    if not facts.chat_template_length:
        yield s.hit(
            "client.chat",
            f"model {model!r} of service {s.name!r} has no chat template, so the "
            "server falls back to a built-in one (a 250-token request became 73,600)",
            "set chat_template_file to the template the model needs, or client.chat: "
            "false for a completion-only (base) model",
        )


@service_rule("chat-template-file-missing", "L-19", "error")
def template_file_missing(s: Subject) -> Iterator[Hit]:
    """the chat template file named in the fleet is not a regular file of the repository"""
    path = s.service.chat_template_file
    if path is None:
        return
    # The same rule the renderers read it by (a symlink leading out, a FIFO, a device:
    # its content would land in a rendered ConfigMap or hang the render).
    problem = tree_path_problem(s.ctx.root, path)
    if problem is not None:
        yield s.hit(
            "chat_template_file",
            f"chat template file of service {s.name!r}: {problem}",
            "commit the template (path relative to fleet.yaml); hosts read it from their checkout",
        )


@service_rule("vision-without-mmproj", "L-22", "error", services="gguf")
def vision_projector(s: Subject) -> Iterator[Hit]:
    """image input on llama.cpp without --mmproj comes up healthy and text-only"""
    if "image" in s.service.client.input and not s.service.mmproj:
        yield s.hit(
            "client.input",
            f"service {s.name!r} promises image input but has no mmproj",
            "declare the projector GGUF as a file of the model and set mmproj to it",
        )


@service_rule("mmproj-without-image-input", "L-22", "warning")
def projector_unadvertised(s: Subject) -> Iterator[Hit]:
    """a projector is loaded but clients are not told the endpoint takes images"""
    if s.service.mmproj and "image" not in s.service.client.input:
        yield s.hit(
            "client.input",
            f"service {s.name!r} loads projector {s.service.mmproj!r} but client.input has "
            "no image",
            "add image to client.input (client configs advertise it), or drop mmproj to "
            "save its memory (~1.5x its file size, L-28)",
        )
