"""Rules over the command line a server really gets: extra_args parsed, not appended blind.

- ``extra-args-field-flag`` (L-25): a flag inferfleet renders from a field
  (``-c``, ``--parallel``, ``-fa``, ``-ctv``, ``-ot``, ``--gpu-memory-utilization``
  ...) in ``extra_args`` wins over the fleet file and bypasses every rule about
  it; ``-c``/``--parallel`` silently break the per-slot contract. The render
  refuses the same words (:func:`inferfleet.runtimes.flags.field_overrides`).
- ``extra-args-unknown-flag`` (L-42): a flag the pinned runtime does not take
  crash-loops the unit on the host; checked against the binary's own
  ``--help`` when the binary is on this machine, skipped (saying why) when not.
- ``mmap-disabled`` (L-23): the effective argv or environment turns mmap off
  for a model whose embedding tables (read from its GGUF header) are huge.

The runtime's flag list is an effect (it runs the binary): the CLI hands a
source in (``run_checks(flags=...)``); without one the rule skips.
"""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import Hit, Skip, Subject, header_rule, service_rule
from inferfleet.checks.speculative import is_spec_flag
from inferfleet.gguf import Inspection
from inferfleet.render.secrets import SECRET_FLAGS
from inferfleet.runtimes.flags import field_overrides, parse_args, unknown_flags
from inferfleet.runtimes.llamacpp import HUGE_EMBEDDING, embedding_bytes, mmap_disabled

NO_SOURCE = "the runtime's flag list is read by `inferfleet check` (not through this entry point)"


def owned_elsewhere(flag: str) -> bool:
    """Flags a more specific rule reports: speculative ones (L-13), secrets (L-06)."""
    return is_spec_flag(flag) or flag in SECRET_FLAGS


@service_rule("extra-args-field-flag", "L-25", "error")
def field_flag(s: Subject) -> Iterator[Hit]:
    """a flag inferfleet renders from a field is set in extra_args, bypassing the fleet file"""
    for found in field_overrides(s.traits.flags, s.service.extra_args):
        if owned_elsewhere(found.flag):
            continue
        yield s.hit(
            f"extra_args[{found.index}]",
            f"service {s.name!r} passes {found.written} in extra_args; inferfleet renders that "
            f"flag from services.{s.name}.{found.field}, and the rules about it would judge a "
            "value the server never gets",
            found.hint(s.name),
        )


@service_rule("extra-args-unknown-flag", "L-42", "error")
def unknown_flag(s: Subject) -> Iterator[Hit | Skip]:
    """a flag in extra_args that the pinned runtime does not take: the unit would crash-loop"""
    source = s.ctx.flags
    if not s.service.extra_args:
        return
    if source is None:
        yield Skip(s.name, NO_SOURCE)
        return
    assert s.service.runtime is not None
    known = source(s.service.runtime, s.runtime)
    if isinstance(known, str):
        yield Skip(s.name, known)
        return
    for found in unknown_flags(s.traits.flags, known, s.service.extra_args):
        yield s.hit(
            f"extra_args[{found.index}]",
            f"service {s.name!r} passes {found.written}, which {found.problem}; the server "
            "would refuse to start and its unit crash-loop",
            found.fix,
        )


def _mmap_off(s: Subject) -> tuple[str, str] | None:
    """What turns mmap off for the service (the culprit, and the field it is set in), or None."""
    argv = s.argv
    if isinstance(argv, str):
        return None  # the launch cannot be built: other rules say why
    maps = {
        "runtime_env": s.service.runtime_env,
        "env": s.service.env,
        "container.env": s.service.container.env,
    }
    env = {k: v for values in maps.values() for k, v in values.items()}
    culprit = mmap_disabled(parse_args(argv, s.traits.flags.takes), env)
    if culprit is None:
        return None
    name = culprit.split("=", 1)[0]
    where = next((f"{m}.{name}" for m, values in maps.items() if name in values), "extra_args")
    return culprit, where


def _model_if_mmap_off(s: Subject) -> str | None:
    """The service's model, read only where mmap is off (the lesson's scope, L-23)."""
    return s.service.model if _mmap_off(s) is not None else None


@header_rule("mmap-disabled", "L-23", "error", model=_model_if_mmap_off)
def mmap_off(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """mmap is off for a model whose huge embedding tables would land in anonymous memory"""
    found = _mmap_off(s)
    assert found is not None  # the model picker returned this model only then
    culprit, where = found
    size = embedding_bytes(facts)
    if size < HUGE_EMBEDDING:
        return  # the lesson is about huge embedding tables; a small one loads either way
    yield s.hit(
        where,
        f"service {s.name!r} starts llama-server with mmap off ({culprit}), and model "
        f"{model!r} has {size / (1 << 30):.1f} GiB of embedding tables: they are read into "
        "anonymous memory, and a model with a huge embedding table was killed silently by "
        "its cgroup",
        "remove it: keep mmap on (the default load mode, auto, maps the file)",
    )
