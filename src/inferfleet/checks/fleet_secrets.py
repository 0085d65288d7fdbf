"""An API key anywhere in the fleet file but an env file (L-55).

``secret-on-command-line`` (L-06) judges ``extra_args`` and
``secret-in-fleet-file`` the environment maps; this rule walks every other
field of the fleet (names, paths, health commands, template kwargs, the
gateway and the proxy) with the same detector, from
:func:`inferfleet.checks.secret_scan.fleet_secrets`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.checks.secret_scan import fleet_secrets

# Fields the two older rules own (one finding per secret, from the rule that names its place).
_OWNED = re.compile(r"^services\.[^.]+\.(env|runtime_env|container\.env|extra_args)$")


def _owned(path: str) -> bool:
    return _OWNED.match(path) is not None


@rule("secret-in-fleet-field", "L-55", "error")
def secret_in_fleet_field(ctx: CheckContext) -> Iterator[Hit]:
    """an API key or other credential is written in a fleet field instead of an env file"""
    for found in fleet_secrets(ctx.fleet, skip=_owned):
        parts = found.field.split(".")
        service = parts[1] if parts[0] == "services" and len(parts) > 2 else None
        what = f"service {service!r}" if service is not None else f"the fleet's {parts[0]}"
        yield Hit(
            service,
            found.field,
            f"{what} has a key-looking value in {found.field} ({found.redacted}); the fleet "
            "file is committed and copied to every clone",
            "move it to an untracked mode-600 env file on the host (secrets_env for a "
            "service, keys_env for the gateway and the proxy) and refer to it by name",
        )
