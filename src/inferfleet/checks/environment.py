"""Environment and secret rules (L-06, L-24, L-54, L-55)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.render.secrets import (
    GENERIC_NAMES,
    flag_secrets,
    is_secret_name,
    redact,
    runtime_owned,
    secret_in,
)
from inferfleet.render.settings import PLACEHOLDER


@rule(
    "secret-on-command-line",
    "L-06",
    "error",
    "a token on a command line is readable by every user in /proc/<pid>/cmdline",
)
def secret_argv(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        for found in flag_secrets(service.extra_args):
            yield Hit(
                name,
                f"services.{name}.extra_args",
                f"service {name!r} passes {found} on its command line",
                "put the secret in the secrets_env file (e.g. LLAMA_API_KEY, HF_TOKEN); the "
                "server reads it from its environment",
            )


@rule(
    "env-runtime-name",
    "L-24",
    "error",
    "a tunable named like a variable the OS or GPU runtime reads itself leaks into it",
)
def runtime_names(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        for key in service.env:
            reason = runtime_owned(key)
            if reason is not None:
                yield Hit(
                    name,
                    f"services.{name}.env.{key}",
                    f"tunable {key} of service {name!r}: {reason}",
                    "rename it (TEMP=1.0 for sampling made every HIP load segfault); if the "
                    "runtime is meant to read it, move it to runtime_env",
                )


@rule(
    "runtime-env-generic-name",
    "L-24",
    "error",
    "runtime_env sets a name every process reads (TEMP, HOST, PATH ...)",
)
def generic_runtime_env(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        for key in service.runtime_env:
            if key.upper() in GENERIC_NAMES:
                yield Hit(
                    name,
                    f"services.{name}.runtime_env.{key}",
                    f"service {name!r} sets {key} for the runtime; the OS, the shell and the "
                    "GPU runtime all read it",
                    "leave it to the system; set the specific variable the runtime documents",
                )


def _env_maps(ctx: CheckContext) -> Iterator[tuple[str, str, dict[str, str]]]:
    for name, service in ctx.fleet.services.items():
        yield name, f"services.{name}.env", service.env
        yield name, f"services.{name}.runtime_env", service.runtime_env
        yield name, f"services.{name}.container.env", service.container.env


@rule(
    "secret-in-fleet-file",
    "L-55",
    "error",
    "a secret is written in the (committed) fleet file",
)
def secret_in_fleet(ctx: CheckContext) -> Iterator[Hit]:
    for name, where, values in _env_maps(ctx):
        for key, value in values.items():
            token = secret_in(value)
            if token is not None or (is_secret_name(key) and value and "${" not in value):
                shown = redact(token) if token is not None else f"{key}=…"
                yield Hit(
                    name,
                    f"{where}.{key}",
                    f"service {name!r} has a secret in the fleet file ({shown})",
                    "move it to the untracked secrets_env file on the host (mode 600) and "
                    "commit an example with a placeholder",
                )


@rule(
    "settings-template-unsafe",
    "L-54",
    "error",
    "a settings template uses names outside its allowlist, or renders into the repo",
)
def settings_templates(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        host = ctx.fleet.hosts[service.host]
        for index, settings in enumerate(service.settings):
            field = f"services.{name}.settings[{index}]"
            path = ctx.root / settings.template
            try:
                text = path.read_text(encoding="utf-8")
            except OSError:
                yield Hit(
                    name,
                    f"{field}.template",
                    f"settings template {settings.template!r} of service {name!r} is missing",
                    "commit the template next to the fleet file",
                )
                continue
            outside = sorted({n for n in PLACEHOLDER.findall(text) if n not in settings.allow})
            if outside:
                yield Hit(
                    name,
                    f"{field}.allow",
                    f"settings template {settings.template!r} of service {name!r} uses "
                    f"{', '.join(outside)}, which are not in its allowlist",
                    "add them to allow if they are meant to be rendered",
                )
            checkout = host.checkout.rstrip("/")
            if settings.dest == checkout or settings.dest.startswith(checkout + "/"):
                yield Hit(
                    name,
                    f"{field}.dest",
                    f"settings of service {name!r} would be rendered into the checkout "
                    f"({settings.dest}), where a secret can be committed",
                    "render to a path outside the repository, e.g. ~/.config/<app>/",
                )
