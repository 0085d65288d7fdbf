"""``inferfleet completion bash|zsh|fish``: the shell completion script, on stdout.

Install it the way each shell expects, e.g.
``inferfleet completion bash > ~/.local/share/bash-completion/completions/inferfleet``,
``inferfleet completion zsh > "${fpath[1]}/_inferfleet"`` or
``inferfleet completion fish > ~/.config/fish/completions/inferfleet.fish``. The script
asks ``inferfleet`` itself for completions (verbs, options, choices), so it never goes
stale when inferfleet is upgraded.
"""

from __future__ import annotations

from enum import StrEnum

import typer

from inferfleet.cli.app import COMPLETE_VAR, PROG


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    shell: Shell = typer.Argument(..., help="The shell to complete in: bash, zsh or fish."),
) -> None:
    """Print the shell completion script for bash, zsh or fish."""
    # Typer's own `--show-completion` uses this; it has no public name for it.
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell.value))
