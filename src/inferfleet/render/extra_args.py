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
from inferfleet.fleetfile.groups import members
from inferfleet.render.secrets import SECRET_FLAGS, flag_secrets
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


def refuse_launch_flags(fleet: Fleet, unit: str) -> None:
    """Every refusal of a unit's ``extra_args``: for a swap group, of each member's, which
    become the router's presets (a member passes what a single service passes)."""
    checked = members(fleet, unit) if unit in fleet.groups else {}
    if not checked and unit in fleet.services:
        checked = {unit: fleet.services[unit]}
    for name, service in checked.items():
        refuse_secret_flags(name, service)
        refuse_field_flags(name, service, fleet)


def refuse_secret_flags(name: str, service: Service) -> None:
    """``extra_args`` carry no secret: every user reads ``/proc/<pid>/cmdline`` (L-06).

    The one detector (:func:`inferfleet.render.secrets.flag_secrets`) that the
    ``secret-on-command-line`` check uses, so ``up``, ``apply`` and ``render``
    refuse exactly what ``check`` reports.
    """
    found = flag_secrets(service.extra_args)
    if found:
        raise UsageError(
            f"service {name!r} passes {', '.join(found)} on its command line (extra_args)",
            where=f"service {name}",
            hint="every user of the host can read a process's argv; put the secret in the "
            "service's secrets_env file (e.g. LLAMA_API_KEY, HF_TOKEN), the server reads it "
            "from its environment",
        )
