"""The working state of one cycle: node room, team usage and who holds what.

Kueue's habit: every admission adds its usage here so later entries see it,
and every what-if removal returns a restore closure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .demand import Demand, Vector, per_node_usage
from .model import Snapshot, Tier
from .placement import Placement, usage_on_nodes
from .quota import Quota
from .room import Room


@dataclass(slots=True)
class Holder:
    """A job holding room: running at the snapshot, or admitted this cycle.

    `fresh` marks jobs admitted in this cycle (never victims); `taken` marks
    jobs already chosen as victims by an earlier preemptor.
    """

    id: str
    team: str | None
    tier: Tier | None
    started: int
    usage: Vector
    on_nodes: dict[int, Vector]
    fresh: bool = False
    taken: bool = False
    key: tuple[int, int, str] = ()

    def __post_init__(self) -> None:
        self.key = self.victim_key()

    @property
    def steady(self) -> bool:
        """Returns whether the job runs at a non-preemptible tier."""
        return self.tier is not None and not self.tier.preemptible

    def victim_key(self) -> tuple[int, int, str]:
        """Returns the R8 order within a group: lower tier, most recently started, id."""
        return (self.tier.value if self.tier else 0, -self.started, self.id)


class State:
    """Room, quota and holders, changed only through admit and remove."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.room = Room(snapshot.nodes)
        capacity = (sum(n.gpu for n in snapshot.nodes), sum(n.cpu for n in snapshot.nodes),
                    sum(n.memory for n in snapshot.nodes))
        self.quota = Quota(snapshot.teams, capacity)
        tiers = {t.name: t for t in snapshot.tiers}
        self.holders: dict[str, Holder] = {}
        self.by_team: dict[str, list[Holder]] = {t.name: [] for t in snapshot.teams}
        for job in snapshot.running:
            on_nodes: dict[int, Vector] = {}
            total = [0, 0, 0]
            for name, v in per_node_usage(job.replicas, job.nodes).items():
                total[0] += v[0]
                total[1] += v[1]
                total[2] += v[2]
                # A node the snapshot no longer lists (drained, tainted) holds
                # no schedulable room; the usage still counts against quota.
                i = self.room.index.get(name)
                if i is not None:
                    on_nodes[i] = v
                    self.room.take(i, v)
            holder = Holder(job.id, job.team, tiers.get(job.tier) if job.tier else None,
                            job.started, (total[0], total[1], total[2]), on_nodes)
            self.quota.charge(job.team, holder.usage, holder.steady)
            self.holders[job.id] = holder
            if job.team in self.by_team:
                self.by_team[job.team].append(holder)
        for held in self.by_team.values():
            held.sort(key=lambda h: h.key)

    def remove(self, holder: Holder) -> Callable[[], None]:
        """Takes a holder's usage out of room and quota; returns the restore closure."""
        give_back = self.room.give_many(holder.on_nodes)
        charge_again = self.quota.what_if_gone(holder.team, holder.usage, holder.steady)

        def restore() -> None:
            give_back()
            charge_again()

        return restore

    def release(self, holder: Holder) -> None:
        """Takes a holder's usage out of room and quota for good (a job ended)."""
        for i, v in holder.on_nodes.items():
            self.room.give(i, v)
        self.quota.credit(holder.team, holder.usage, holder.steady)

    def admit(self, job_id: str, team: str, tier: Tier, demand: Demand,
              placement: Placement, started: int) -> Holder:
        """Adds an admitted job's usage to room and quota; returns its holder."""
        on_nodes = usage_on_nodes(demand, placement)
        for i, v in on_nodes.items():
            self.room.take(i, v)
        holder = Holder(job_id, team, tier, started, demand.total, on_nodes, fresh=True)
        self.quota.charge(team, demand.total, holder.steady)
        self.holders[job_id] = holder
        return holder

    def hold(self, holder: Holder) -> None:
        """Adds a copy of a holder from another state (same node indices)."""
        copy = Holder(holder.id, holder.team, holder.tier, holder.started, holder.usage,
                      dict(holder.on_nodes))
        for i, v in copy.on_nodes.items():
            self.room.take(i, v)
        self.quota.charge(copy.team, copy.usage, copy.steady)
        self.holders[copy.id] = copy

    def reserve(self, before: dict[int, Vector]) -> None:
        """Takes back any room above `before` on those nodes, so room freed by
        a job's victims serves only that job in this cycle (R8)."""
        for i, (g, c, m) in before.items():
            now = self.room.free(i)
            extra = (max(0, now[0] - g), max(0, now[1] - c), max(0, now[2] - m))
            if extra != (0, 0, 0):
                self.room.take(i, extra)
