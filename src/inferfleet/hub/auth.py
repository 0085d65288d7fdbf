"""Where the Hub token comes from, and the one rule for where it may go.

The token is read from (first match wins):

1. ``--token-file PATH`` (or ``INFERFLEET_HF_TOKEN_FILE``): a file only its
   owner can read (mode 600);
2. ``HF_TOKEN`` in the environment;
3. huggingface_hub's stored login (``hf auth login`` writes it, mode 600).

It never travels on a command line (L-06: ``/proc/<pid>/cmdline`` is
readable by every user): inferfleet takes no ``--token VALUE`` option and
starts no child process with it. Where it may be sent is decided by
:mod:`inferfleet.io.token_scope` (the endpoint's origin and Hugging Face's
own); the CDN a download is redirected to gets a signed URL and no
``Authorization`` header.

huggingface_hub's ``get_token`` is not used: it reads the stored login
without checking who else can read it (L-06), and knows no token file of
ours. Its login file's location is used as is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.bounded import MAX_SECRET_FILE, read_bounded_text
from inferfleet.errors import AuthError
from inferfleet.io.token_scope import bearer

TOKEN_FILE_ENV = "INFERFLEET_HF_TOKEN_FILE"


@dataclass(frozen=True)
class Token:
    """A token and where it came from; its value never shows in repr or str."""

    value: str = field(repr=False)
    source: str

    def __str__(self) -> str:
        return f"<token from {self.source}>"


def resolve_token(
    *, token_file: Path | None = None, environ: Mapping[str, str] | None = None
) -> Token | None:
    """The token to use, or None for anonymous access."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        return read_token_file(token_file, source=f"--token-file {token_file}")
    if env.get(TOKEN_FILE_ENV):
        path = Path(env[TOKEN_FILE_ENV]).expanduser()
        return read_token_file(path, source=f"{TOKEN_FILE_ENV}={path}")
    value = (env.get("HF_TOKEN") or "").strip()
    if value:
        return Token(value, "HF_TOKEN")
    stored = stored_login_path(env)
    if stored.is_file():
        return read_token_file(stored, source=f"huggingface_hub login ({stored})")
    return None


def stored_login_path(environ: Mapping[str, str]) -> Path:
    """Where huggingface_hub keeps the login token (``HF_TOKEN_PATH`` overrides it)."""
    if environ.get("HF_TOKEN_PATH"):
        return Path(environ["HF_TOKEN_PATH"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "token"
    from huggingface_hub import constants

    return Path(constants.HF_TOKEN_PATH).expanduser()


def read_token_file(path: Path, *, source: str) -> Token:
    """Read a token file that only its owner can read (L-06)."""
    value = read_bounded_text(
        path,
        MAX_SECRET_FILE,
        what="token file",
        error=AuthError,
        hint="write the token into it (umask 077; printf %s TOKEN > FILE) or use HF_TOKEN",
        private=True,
    ).strip()
    if not value or any(c.isspace() for c in value):
        raise AuthError(
            f"token file {path} does not hold one token",
            hint="the file must contain the token alone (hf_...), on one line",
        )
    return Token(value, source)


def auth_headers(url: str, *, endpoint: str, token: Token | None) -> dict[str, str]:
    """``Authorization`` for ``url`` only where :mod:`inferfleet.io.token_scope` allows it."""
    return bearer(url, endpoint=endpoint, token=None if token is None else token.value)
