"""What this machine alone says about a model: its GGUF header, its safetensors
config and headers, and its declared files by ``stat`` (L-08).

:class:`LocalSources` answers ``check``'s model questions without the network;
:class:`inferfleet.hub.headers.ModelSources` falls back to it before reading a
package or the Hub. Each answer is the facts, or the reason they cannot be had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from inferfleet.artifacts.locate import main_path, model_dir
from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.artifacts.st_model import CONFIG, SafetensorsModel, folder_reader, read_model
from inferfleet.errors import FleetError, SpecError
from inferfleet.fleetfile.fleet import PathSource
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.gguf import GGUFError, Inspection, inspect

if TYPE_CHECKING:  # the budget and facts sit above the model files; only the types are named
    from inferfleet.budget.memreport import BootReport
    from inferfleet.facts.hosts import RecordedHost


@dataclass(frozen=True)
class SourceListing:
    """The files a model's source holds, as it states them (size, and sha256 where it has one)."""

    source: str  # for messages: "hub org/repo@rev", "package x", "this machine (stat)"
    files: dict[str, ManifestEntry]  # by path; a declared path absent here is not in the source


def not_here(model_name: str, folder: Path) -> str:
    """Why a model's facts cannot be read here: one text for every rule that needs its
    files, so `check` reports the cause once (what it holds is checked on the host)."""
    return f"model {model_name!r} is not on this machine ({folder})"


@dataclass
class LocalSources:
    """This machine only: the model's main GGUF where the fleet says it lives, never the network."""

    loaded: LoadedFleet

    def model_file(self, model_name: str) -> Path | str:
        """The model's main GGUF on this machine, or why there is none to read."""
        model = self.loaded.fleet.models[model_name]
        try:
            path = main_path(model_name, model, self.loaded.root)
        except SpecError as exc:
            return f"model {model_name!r}: {exc.message}"
        if path is None:
            return f"model {model_name!r} is not a GGUF (header rules read GGUF files)"
        if not path.is_file():
            return not_here(model_name, path.parent)
        return path

    def header(self, model_name: str) -> Inspection | str:
        path = self.model_file(model_name)
        if isinstance(path, str):
            return path
        try:
            return inspect(path)
        except GGUFError as exc:
            return f"model {model_name!r}: header unreadable: {exc.message}"

    def safetensors(self, model_name: str) -> SafetensorsModel | str:
        """A safetensors model's config and weight headers from its folder here, or why not."""
        model = self.loaded.fleet.models[model_name]
        folder = model_dir(model_name, model)
        if not (folder / CONFIG).is_file():
            return f"model {model_name!r} is not on this machine ({folder / CONFIG})"
        try:
            return read_model(
                folder_reader(folder), [e.path for e in declared_files(model, self.root)]
            )
        except FleetError as exc:
            return f"model {model_name!r}: {exc.render()}"

    @property
    def root(self) -> Path:
        return self.loaded.root

    def boots(self, service_name: str) -> Sequence[BootReport] | None:
        """Recorded boots are read by the CLI's sources (they live in the repository)."""
        return None

    def host_gpus(self, host_name: str) -> RecordedHost | None:
        """Recorded hosts are read by the CLI's sources (they live in the repository)."""
        return None

    def source_files(self, model_name: str) -> SourceListing | str:
        """A path model's files by ``stat`` (L-08); other sources are not read here."""
        model = self.loaded.fleet.models[model_name]
        if not isinstance(model.source, PathSource):
            return f"model {model_name!r}: its source is not read on this machine alone"
        folder = model_dir(model_name, model)
        try:
            declared = declared_files(model, self.loaded.root)
        except SpecError as exc:
            return f"model {model_name!r}: {exc.message}"
        found: dict[str, ManifestEntry] = {}
        for entry in declared:
            try:
                info = (folder / entry.path).stat()
            except OSError:
                return not_here(model_name, folder)
            found[entry.path] = ManifestEntry(entry.path, info.st_size, "size", "")
        return SourceListing(f"{folder} (stat)", found)
