"""The render's refusal of ``extra_args`` that set what a service field owns (L-25).

One function, used by the one launch pipeline (``up``, ``apply``, ``show``)
and by ``render`` (even with ``--no-check``), over the one detector that the
``extra-args-field-flag`` check uses
(:func:`inferfleet.runtimes.flags.field_overrides`): ``-c 8192`` or
``--parallel 4`` there would silently replace the per-slot contract, ``-fa
off`` or ``-ctv q8_0`` the values every rule judged, so no verb renders or
starts such a service, whether or not ``check`` ran.
"""

from __future__ import annotations

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.render.secrets import SECRET_FLAGS
from inferfleet.runtimes.flags import field_overrides
from inferfleet.runtimes.registry import traits


def refuse_field_flags(name: str, service: Service, fleet: Fleet) -> None:
    """Raise when service ``name``'s ``extra_args`` set a flag the adapter renders from a field."""
    runtime = fleet.runtimes.get(service.runtime or "")
    if service.kind != "llm" or runtime is None:
        return
    # A secret flag gets the L-06 refusal (render/pipeline.py), which never
    # prints its value; no value is printed here either.
    found = [
        f
        for f in field_overrides(traits(runtime.kind).flags, service.extra_args)
        if f.flag not in SECRET_FLAGS
    ]
    if found:
        written = dict.fromkeys(f.written.split("=", 1)[0] for f in found)
        raise UsageError(
            f"service {name!r} sets {', '.join(written)} in extra_args; "
            "inferfleet renders those flags from the fleet file",
            where=f"services.{name}.extra_args",
            hint="; ".join(dict.fromkeys(f.hint(name) for f in found)),
        )
