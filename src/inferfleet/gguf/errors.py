"""The GGUF layer's error: a file or URL whose header cannot be read.

It lives here rather than in :mod:`inferfleet.errors` so the GGUF reader stays
a self-contained package; it still derives from :class:`FleetError`, so the
CLI prints it as ``where: message -- hint`` without a traceback.
"""

from __future__ import annotations

from inferfleet.errors import FleetError


class GGUFError(FleetError, ValueError):
    """A GGUF header is invalid, truncated, hostile or cannot be fetched.

    ``source`` is the path or URL, ``offset`` the byte offset where the
    problem was found (``None`` when it is not about a position in the file).
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        offset: int | None = None,
        hint: str = "",
    ) -> None:
        where = source
        if offset is not None:
            where = f"{source} @ offset {offset}" if source else f"offset {offset}"
        super().__init__(message, hint=hint, where=where)
        self.source = source
        self.offset = offset


class GGUFNotFound(GGUFError):
    """The file or URL does not exist (a missing split part is reported, not fatal)."""
