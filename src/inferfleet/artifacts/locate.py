"""Where a model's files live, and which one a loader opens.

One rule for every caller (``up``, ``apply``, ``check``, ``budget``, ``show``,
``render``): the folder is the path source's path, else the Hugging Face cache's
snapshot of the commit for a Hub source with ``hf_cache`` (used in place,
:mod:`~inferfleet.artifacts.hfcache`), else the model's ``dir:``, else
``<cache>/models/<name>``; the main file is ``main:`` if set, else part 1
of a split GGUF (never a concatenation, L-04), else the model's GGUF; a
model without a GGUF (safetensors) is loaded as its folder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from inferfleet import paths
from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.fleet import HubSource, Model, PathSource
from inferfleet.fleetfile.loader import LoadedFleet

SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$")


def model_named(loaded: LoadedFleet, name: str) -> Model:
    """The fleet's model ``name``, or a usage error listing the known ones."""
    if name not in loaded.fleet.models:
        raise UsageError(
            f"no model named {name!r} in {loaded.path}",
            hint=f"known models: {', '.join(sorted(loaded.fleet.models)) or '(none)'}",
        )
    return loaded.fleet.models[name]


def model_dir_on(name: str, model: Model, *, home: str, cache_dir: str) -> str:
    """The model's folder on a host with this home and inferfleet cache dir (pure)."""
    if isinstance(model.source, PathSource):
        return _expand(model.source.path, home)
    if isinstance(model.source, HubSource) and model.source.hf_cache is not False:
        from inferfleet.artifacts.hfcache import snapshot_dir_on

        return snapshot_dir_on(model.source, home=home)
    if model.dir is not None:
        return _expand(model.dir, home)
    return f"{cache_dir.rstrip('/')}/models/{name}"


def model_dir(name: str, model: Model) -> Path:
    """The model's folder on this host."""
    here = model_dir_on(name, model, home=str(Path.home()), cache_dir=str(paths.cache_dir()))
    return Path(here).expanduser()  # ~user/... too, which only this host can resolve


def record_file(model: Model) -> Path | None:
    """Where the model's verification record lives when not in its folder, else None.

    A snapshot of the Hugging Face cache holds only huggingface_hub's files, so
    its record lives in inferfleet's cache (still stat-cheap on the next check, L-08).
    """
    if isinstance(model.source, HubSource) and model.source.hf_cache is not False:
        from inferfleet.artifacts.hfcache import record_path

        return record_path(model.source.hub, model.source.revision, paths.cache_dir())
    return None


def declared_file(name: str, model: Model, files: list[ManifestEntry], path: str, what: str) -> str:
    """``path`` if it is a declared file of the model, else a SpecError (L-09).

    A server must only ever open a file that was fetched and verified: a ``main``
    or ``mmproj`` outside the declared set would load whatever lies there.
    """
    declared = [f.path for f in files]
    if path not in declared:
        where = "manifest" if model.manifest is not None else "files"
        shown = ", ".join(declared[:8]) + (" ..." if len(declared) > 8 else "")
        raise SpecError(
            f"{what} {path!r} is not a declared file of model {name!r}",
            hint=f"declare it in the model's {where} (size, sha256) so it is fetched and "
            f"verified; declared: {shown or '(none)'}",
        )
    return path


def main_file(model: Model, files: list[ManifestEntry], *, name: str = "") -> str | None:
    """The file a loader opens, relative to the folder; None for a folder model (safetensors)."""
    if model.main is not None:
        return declared_file(name or "this model", model, files, model.main, "main file")
    return pick_main([f.path for f in files])


def pick_main(paths: Sequence[str]) -> str | None:
    """Of these file paths, the one a GGUF loader opens: part 1 of a split (L-04), else the
    model's GGUF (not a projector); None without a GGUF. Also picks the file that
    ``gguf inspect DIR`` and ``gguf inspect REPO`` read."""
    ggufs = sorted(p for p in paths if p.endswith(".gguf"))
    for name in ggufs:
        match = SPLIT_RE.match(Path(name).name)
        if match is not None and int(match["part"]) == 1:
            return name  # part 1 names the others (L-04)
    # A projector (mmproj) rides along; the model is the other GGUF.
    whole = [n for n in ggufs if SPLIT_RE.match(Path(n).name) is None]
    models = [n for n in whole if not Path(n).name.lower().startswith("mmproj")]
    chosen = models or whole or ggufs  # parts without part 1: the split gate refuses them
    return chosen[0] if chosen else None


def main_path(name: str, model: Model, fleet_root: Path) -> Path | None:
    """The main file of model ``name`` on this host; None for a folder model."""
    main = main_file(model, declared_files(model, fleet_root), name=name)
    return None if main is None else model_dir(name, model) / main


def _expand(path: str, home: str) -> str:
    """``~/x`` -> ``<home>/x`` (units and facts of other hosts need absolute paths)."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return f"{home.rstrip('/')}/{path[2:]}"
    return path
