"""A swap group's memory: its largest simultaneous set of members, not the sum of all.

llama-server's router keeps at most ``max_loaded`` members' processes (sleeping
ones included) and evicts the least recently used idle one for a new request;
it pins none, so any ``max_loaded`` members can be loaded together. The
group therefore costs, on each device, what its ``max_loaded`` largest
members cost there (every member when the limit is 0): the worst set the
router can reach. Resident members are always among the counted ones when
they are among the largest, and the figure never undercounts a set that
holds them, because no set of ``max_loaded`` members is larger.

Each member is sized as it would run alone (:func:`inferfleet.budget.fleet.fleet_request`
and :func:`inferfleet.budget.plan.plan`): its own per-slot window x slots,
drafter KV and projector (L-15, L-25, L-28).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from inferfleet.budget.plan import Budget
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import members


def _total(budget: Budget) -> int:
    return sum(d.used for d in budget.devices)


@dataclass(frozen=True)
class GroupFigure:
    group: str
    max_loaded: int  # 0: no limit
    counted: tuple[str, ...]  # the members whose budgets make the figure, largest first
    bytes: int  # their sum over all devices
    members: tuple[str, ...]  # every sized member
    unsized: tuple[str, ...]  # members without a budget (their model could not be read)


def group_figure(fleet: Fleet, group: str, budgets: Mapping[str, Budget]) -> GroupFigure:
    """The group's largest simultaneous set among the sized members."""
    limit = fleet.groups[group].max_loaded
    names = list(members(fleet, group))
    sized = sorted((n for n in names if n in budgets), key=lambda n: -_total(budgets[n]))
    counted = tuple(sized if limit == 0 else sized[:limit])
    return GroupFigure(
        group,
        limit,
        counted,
        sum(_total(budgets[n]) for n in counted),
        tuple(sized),
        tuple(n for n in names if n not in budgets),
    )


def simultaneous(fleet: Fleet, budgets: Mapping[str, Budget]) -> dict[str, Budget]:
    """``budgets`` with each group's members cut to its largest simultaneous set.

    What the memory rule of ``check`` sums per device: the services outside
    groups as they are, and per group only the members that can be loaded
    together at worst.
    """
    dropped: set[str] = set()
    for group in fleet.groups:
        figure = group_figure(fleet, group, budgets)
        dropped |= set(figure.members) - set(figure.counted)
    return {name: budget for name, budget in budgets.items() if name not in dropped}
