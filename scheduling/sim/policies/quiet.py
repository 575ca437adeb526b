"""When a planner's pass may be skipped: a pass it skips would have
started nothing, so the plans are those of a pass at every second
something happens.

- no pass when the queue is empty, or when the previous pass started
  nothing and since then nothing ended, no thrash guard expired and no new
  job could fit or preempt (it has no room and no victim it could take);
- a pass is also due when a queued job starts starving, under
  reservations, since it may then reserve room (reduced.py).

The planner reads its own record of the last pass for all but the new
jobs (`Planner._unchanged`); `Arrivals` tells whether a new job could fit,
be rejected or preempt.

With GPU types (`--types`) the same shortcut holds per type, since R2, R6,
R7 and R11 work on one type at a time (the policy's types.py) and a victim
is only ever taken from the type its preemptor tries:

- a pass is skipped on the same conditions, with the test for a new job
  made per type it accepts: free room on that type's nodes, a rejection by
  R10 there (its nominal, for a non-preemptible job, or the type's GPUs),
  or reclaim in that type.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from scheduling.policy import Tier

from ..engine import Cluster, Entry
from ..world import World


@dataclass(frozen=True, slots=True)
class Arrivals:
    """Tells whether a job that arrived since the last pass could be placed,
    be rejected or take a victim in this one, from the planner's tiers and,
    with GPU types, each type's nodes and team -> type -> nominal GPUs."""

    world: World
    tiers: dict[str, Tier]
    ranges: dict[str, range]
    type_nominal: dict[str, dict[str, int]]

    def may_act(self, cluster: Cluster, entry: Entry) -> bool:
        """Returns False only when `entry` can neither be placed nor take a victim now."""
        if self.world.gpu_types:
            return self._may_act_typed(cluster, entry)
        free = cluster.free
        gpus = entry.gpus
        if gpus <= free.total:
            if gpus <= len(free.buckets) - 1:
                if free.largest() >= gpus:
                    return True
            elif len(free.buckets[-1]) >= gpus // (len(free.buckets) - 1):
                return True
        nominal = self.world.nominal
        team = entry.team
        tier = self.tiers[entry.tier.name]
        if not tier.preemptible and gpus > nominal[team]:
            return True  # rejected (R10) in this pass
        if cluster.used[team] + gpus <= nominal[team] and any(
            cluster.used[t] > nominal[t] for t in nominal if t != team
        ):
            return True  # reclaim may be possible
        return self._may_preempt_own(cluster, team, tier)

    def _may_preempt_own(self, cluster: Cluster, team: str, tier: Tier) -> bool:
        """Returns whether `team` runs preemptible work of a lower tier than `tier` (R5)."""
        return any(self.tiers[name].value < tier.value and self.tiers[name].preemptible
                   for name, gpus in cluster.tier_gpus[team].items() if gpus)

    def _may_act_typed(self, cluster: Cluster, entry: Entry) -> bool:
        """Returns False only when `entry` can, on none of the GPU types it
        accepts, be placed, be rejected (R10) or take a victim now: the
        checks of `may_act`, each on one type's nodes and quota."""
        free = cluster.free
        size = len(free.buckets) - 1
        gpus, team = entry.gpus, entry.team
        tier = self.tiers[entry.tier.name]
        used, nominal = cluster.team_type_used, self.type_nominal
        for kind in self.world.type_of.get(entry.id, self.world.gpu_types):
            within = self.ranges[kind]
            if gpus <= size:
                if any(_count(free.buckets[b], within) for b in range(gpus, size + 1)):
                    return True
            elif _count(free.buckets[size], within) >= gpus // size:
                return True
            if (not tier.preemptible and gpus > nominal[team][kind]) or gpus > len(within) * size:
                return True  # may be rejected (R10) in this pass
            if used[(team, kind)] + gpus <= nominal[team][kind] and any(
                used[(t, kind)] > nominal[t][kind] for t in nominal if t != team
            ):
                return True  # reclaim may be possible
        return self._may_preempt_own(cluster, team, tier)


def _count(indices: list[int], nodes: range) -> int:
    """Returns how many of sorted `indices` fall in `nodes`."""
    return bisect_left(indices, nodes.stop) - bisect_left(indices, nodes.start)
