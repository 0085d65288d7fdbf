"""The budget's error: inputs that cannot be sized (a header without the
attention layout, a cache type llama.cpp refuses, a log without a memory report).

It derives from :class:`FleetError` (printed as ``where: message -- hint``)
and ``ValueError`` (bad input), like the GGUF layer's own error.
"""

from __future__ import annotations

from inferfleet.errors import EXIT_USAGE, FleetError


class BudgetError(FleetError, ValueError):
    """The inputs of a budget cannot be sized as given."""

    exit_code = EXIT_USAGE
