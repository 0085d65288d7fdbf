"""Environment and secret rules (L-06, L-24, L-54, L-55)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.bounded import MAX_DECLARED_TEXT, read_tree_file
from inferfleet.checks.engine import Hit, Subject, service_rule
from inferfleet.errors import FleetError
from inferfleet.render.secrets import (
    GENERIC_NAMES,
    credential_in,
    flag_secrets,
    is_secret_name,
    redact,
    runtime_owned,
)
from inferfleet.render.settings import PLACEHOLDER


@service_rule("secret-on-command-line", "L-06", "error", services="all")
def secret_argv(s: Subject) -> Iterator[Hit]:
    """a token on a command line is readable by every user in /proc/<pid>/cmdline"""
    for found in flag_secrets(s.service.extra_args):
        yield s.hit(
            "extra_args",
            f"service {s.name!r} passes {found} on its command line",
            "put the secret in the secrets_env file (e.g. LLAMA_API_KEY, HF_TOKEN); the "
            "server reads it from its environment",
        )


@service_rule("env-runtime-name", "L-24", "error", services="all")
def runtime_names(s: Subject) -> Iterator[Hit]:
    """a tunable named like a variable the OS or GPU runtime reads itself leaks into it"""
    for key in s.service.env:
        reason = runtime_owned(key)
        if reason is not None:
            yield s.hit(
                f"env.{key}",
                f"tunable {key} of service {s.name!r}: {reason}",
                "rename it (TEMP=1.0 for sampling made every HIP load segfault); if the "
                "runtime is meant to read it, move it to runtime_env",
            )


@service_rule("runtime-env-generic-name", "L-24", "error", services="all")
def generic_runtime_env(s: Subject) -> Iterator[Hit]:
    """runtime_env sets a name every process reads (TEMP, HOST, PATH ...)"""
    for key in s.service.runtime_env:
        if key.upper() in GENERIC_NAMES:
            yield s.hit(
                f"runtime_env.{key}",
                f"service {s.name!r} sets {key} for the runtime; the OS, the shell and the "
                "GPU runtime all read it",
                "leave it to the system; set the specific variable the runtime documents",
            )


@service_rule("secret-in-fleet-file", "L-55", "error", services="all")
def secret_in_fleet(s: Subject) -> Iterator[Hit]:
    """a secret is written in the (committed) fleet file"""
    service = s.service
    env_maps = {
        "env": service.env,
        "runtime_env": service.runtime_env,
        "container.env": service.container.env,
    }
    for where, values in env_maps.items():
        for key, value in values.items():
            token = credential_in(value)
            if token is not None or (is_secret_name(key) and value and "${" not in value):
                shown = redact(token) if token is not None else f"{key}=…"
                yield s.hit(
                    f"{where}.{key}",
                    f"service {s.name!r} has a secret in the fleet file ({shown})",
                    "move it to the untracked secrets_env file on the host (mode 600) and "
                    "commit an example with a placeholder",
                )


@service_rule("settings-template-unsafe", "L-54", "error", services="all")
def settings_templates(s: Subject) -> Iterator[Hit]:
    """a settings template uses names outside its allowlist, or renders into the repo"""
    for index, settings in enumerate(s.service.settings):
        field = f"settings[{index}]"
        try:
            text = read_tree_file(
                s.ctx.root,
                settings.template,
                MAX_DECLARED_TEXT,
                what="settings template",
                error=FleetError,
                where=f"{field}.template",
            )
        except FleetError as exc:
            yield s.hit(
                f"{field}.template",
                f"service {s.name!r}: {exc.message}",
                "commit the template next to the fleet file (no absolute path, '..' or "
                "symlink leading out)",
            )
            continue
        outside = sorted({n for n in PLACEHOLDER.findall(text) if n not in settings.allow})
        if outside:
            yield s.hit(
                f"{field}.allow",
                f"settings template {settings.template!r} of service {s.name!r} uses "
                f"{', '.join(outside)}, which are not in its allowlist",
                "add them to allow if they are meant to be rendered",
            )
        checkout = s.host.checkout.rstrip("/")
        if settings.dest == checkout or settings.dest.startswith(checkout + "/"):
            yield s.hit(
                f"{field}.dest",
                f"settings of service {s.name!r} would be rendered into the checkout "
                f"({settings.dest}), where a secret can be committed",
                "render to a path outside the repository, e.g. ~/.config/<app>/",
            )
