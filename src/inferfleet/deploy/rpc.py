"""The effects of a model split over RPC workers: its header, its workers' ports.

The split (:mod:`inferfleet.budget.rpc`) needs the model's layers; the
launch pipeline is pure, so apply, up, show and plan hand it a
:data:`~inferfleet.budget.fleet.ShapeOf` that reads the header where check
and budget read it (:class:`inferfleet.hub.headers.ModelSources`: this
machine's file, else the model's package or the Hub).

Whether a worker answers is asked from the service's own host, by the one
health probe (a TCP connect to ``ADDRESS:PORT``): what ``llama-server
--rpc`` itself needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inferfleet.backends import health as gate
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.fleet import ShapeOf
from inferfleet.budget.shape import ModelShape, model_shape
from inferfleet.fleetfile.exposure import TCP_HEALTH, url_for
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.fleetfile.rpc import worker_address


def shape_reader(fleet: Fleet, path: Path) -> ShapeOf:
    """Read a model's shape (cached per call site) for the RPC split of its service.

    ``path`` is the fleet file (its folder is what model paths are relative to).
    """
    from inferfleet.hub.headers import ModelSources  # the Hub stack, only when asked

    loaded = LoadedFleet(fleet, path, str(path))
    seen: dict[str, ModelShape] = {}

    def shape_of(model: str) -> ModelShape:
        if model not in seen:
            with ModelSources(loaded) as sources:
                found = sources.header(model)
            if isinstance(found, str):
                raise BudgetError(
                    f"the RPC split of model {model!r} needs its header: {found}",
                    hint=f"fetch the model on this host first (inferfleet models fetch {model})",
                )
            seen[model] = model_shape(found)
        return seen[model]

    return shape_of


@dataclass(frozen=True)
class WorkerState:
    host: str
    endpoint: str  # ADDRESS:PORT
    reachable: bool
    detail: str  # why not, when it is not

    @property
    def message(self) -> str:
        if self.reachable:
            return f"rpc worker on {self.host} ({self.endpoint}) answers"
        return f"rpc worker on {self.host} ({self.endpoint}) is unreachable: {self.detail}"


def worker_states(fleet: Fleet, name: str) -> list[WorkerState]:
    """Whether each RPC worker of service ``name`` accepts a connection from here."""
    found = []
    for worker in fleet.services[name].rpc:
        address = worker_address(fleet, worker)
        url = url_for(address, worker.port, TCP_HEALTH)
        answer = gate.connect(url)
        endpoint = url.removeprefix("tcp://")
        found.append(WorkerState(worker.host, endpoint, answer.state == "ok", answer.detail))
    return found
