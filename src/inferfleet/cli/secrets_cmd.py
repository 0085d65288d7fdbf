"""`inferfleet secrets scan`: no secret value in the repo or rendered files (L-55)."""

from __future__ import annotations

from pathlib import Path

import typer

from inferfleet.checks import secret_scan
from inferfleet.documents import SecretFinding, SecretsScanDocument
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.io import process
from inferfleet.output import Output, esc

app = typer.Typer(help="Keep secrets out of the repository (L-55).", no_args_is_help=True)


@app.command("scan")
def scan(
    env_file: list[Path] = typer.Option(
        [], "--env-file", "-e", help="Untracked env file whose secret values must not leak."
    ),
    rendered: list[Path] = typer.Option(
        [], "--rendered", help="A rendered output folder to scan too (inferfleet render)."
    ),
    repo: Path = typer.Option(Path("."), "--repo", help="The fleet repository (git)."),
    all_values: bool = typer.Option(
        False, "--all-values", help="Treat every value of the env files as secret."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a versioned JSON document."),
) -> None:
    """Scan git-tracked files and rendered artifacts for secret values; exit 1 on a find."""
    out = Output(json_mode=json_out)
    secrets: dict[str, tuple[str, str]] = {}
    for path in env_file:
        for name, value in secret_scan.read_env_values(path, all_values=all_values).items():
            secrets[value] = (name, path.name)
    files = tracked_files(repo)
    for folder in rendered:
        files += secret_scan.walk(folder)
    findings = secret_scan.scan(files, secrets, root=repo.resolve())
    if json_out:
        out.emit(
            SecretsScanDocument(
                schema="inferfleet.secrets-scan/v1",
                files=len(files),
                secret_values=len(secrets),
                findings=[
                    SecretFinding(path=f.path, line=f.line, what=f.what, redacted=f.redacted)
                    for f in findings
                ],
            )
        )
    else:
        for f in findings:
            out.line(f"[red]leak[/red] {esc(f.path)}:{f.line}: {esc(f.what)} ({esc(f.redacted)})")
        verdict = "[red]found secrets[/red]" if findings else "[green]clean[/green]"
        out.line(
            f"{verdict}: {len(files)} files scanned for {len(secrets)} secret value(s) "
            "and token-shaped strings"
        )
    if findings:
        raise typer.Exit(EXIT_FAILED)


def tracked_files(repo: Path) -> list[Path]:
    """Files git tracks in ``repo`` (what a push publishes); git runs here, not in checks/."""
    done = process.run(["git", "-C", str(repo), "ls-files", "-z"], timeout=60, check=False)
    if done.returncode != 0:
        raise UsageError(
            f"{repo} is not a git repository",
            hint="run the scan in the fleet repository, or pass files to scan explicitly",
        )
    return [repo / name for name in done.stdout.split("\0") if name]
