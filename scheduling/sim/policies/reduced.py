"""A planner's reduced snapshot: the nodes and running jobs that plan as
the full snapshot does, with every other running job folded into usage no
victim search reaches (planner.py builds the rest of the snapshot, quiet.py
decides when a pass is skipped).

What the snapshot lists, with the same plans as calling `plan` on the full
snapshot:

- the snapshot lists as running jobs only those that could be victims in
  this pass: preemptible jobs of a team that may end the pass above its
  nominal (usage + queued > nominal) while some team could reclaim (usage
  without its preemptible jobs + its smallest queued job <= nominal), and
  preemptible jobs of a lower tier than a queued job of their own team, past
  the thrash guard (R5). Of a team that may be reclaimed from, only the
  first jobs in R8 order: a job is reached only when every preemptible job
  before it is gone, and the team is then at most usage + queued - those
  jobs' GPUs, so once those reach usage + queued - nominal the team is
  within nominal and no later job is a victim (all are listed when a queued
  job has several replica groups: the search's bound then counts every
  eligible job). Every other job is folded into usage that is never a
  victim: per node, outside usage (R12: room without quota), and per team,
  one job of each kind of usage on no listed node (quota without room):
  non-preemptible, and preemptible past the bound (`BEYOND`, last in R8
  order, so R2's non-preemptible usage stays exact);
- the snapshot lists only the nodes that matter: those of listed jobs, those
  with some GPUs free, and as many empty ones, first in node order, as the
  queue has replicas (best fit takes empty nodes in node order, so no pass
  reaches further), at least as many as the widest gang (R10 places each
  job on the empty listed nodes). Every GPU is in some team's nominal, so
  fewer nodes leave no unassigned capacity to borrow either way;
- with reservations, a pass where some queued job has waited longer than
  `starvation_after` may reserve room, and a reservation is the earliest
  time room frees on any node as running jobs end when expected (R14),
  which needs every node and every running job's room and end. Such a pass
  is not reduced: it lists every node and every running job as itself, the
  full snapshot, kept from pass to pass in the policy's `Standing`
  (running.py), which `plan` reads instead of going over the running jobs
  (the policy's standing.py). Without such a job no pass reserves
  anything. A pass is also due when a queued job starts starving, since it
  may then reserve room.
- a team's possible victims are cut in R8's order with checkpoints (least
  unsaved work first); a tier listed whole comes in start order, since the
  policy orders victims itself.

With GPU types (`--types`) the same shortcuts hold per type, since R2, R6,
R7 and R11 work on one type at a time (the policy's types.py) and a victim
is only ever taken from the type its preemptor tries:

- a team may be reclaimed from in type T only while above its nominal of T,
  so the bound is per type: usage of T + queued GPUs of the jobs accepting
  T - nominal of T (a job accepting several types counts toward each, as
  if it got every one of them: an overestimate, so more jobs are listed);
  reclaim is possible in T only when some team's non-preemptible usage of
  T plus its smallest queued job accepting T is within its nominal of T;
  R5's lower-tier jobs are listed per type for the jobs accepting it;
- folded usage is per team and type (`~quota-<team>-<type>`,
  `~beyond-<team>-<type>`, holding that type's GPUs), and the room of
  unlisted jobs is one outside job per type;
- the empty nodes kept are, per type, the first of that type in node order,
  as many as the replicas of the jobs accepting it, and each type keeps at
  least as many nodes as its widest such gang (and one), so R10 sees each
  type's nodes as the full snapshot does.

`test_reduced_snapshots_plan_as_the_full_ones_on_a_cluster_of_gpu_types`
replays typed clusters both ways and requires the same outcome.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from scheduling.policy import ReplicaGroup, RunningJob, Tier

from ..engine import Cluster, Entry
from ..world import World
from .listing import Listing
from .queue import Asked

FOLDED = Tier("~folded", -1, preemptible=False)
# Preemptible usage no victim search can reach in a pass: the highest tier,
# so last in R8 order and never below a preemptor's tier.
BEYOND = Tier("~beyond", 10**9, preemptible=True)
NOWHERE = "~nowhere"


@dataclass(frozen=True, slots=True)
class Reduction:
    """What a planner's reduced snapshots are cut by, fixed for a replay:
    its tiers, the preemptible ones lowest first (R8), and with GPU types
    each type's nodes and team -> type -> nominal GPUs."""

    world: World
    tiers: dict[str, Tier]
    victim_tiers: tuple[Tier, ...]
    ranges: dict[str, range]
    type_nominal: dict[str, dict[str, int]]

    def fold(self, cluster: Cluster, now: int, asks: dict[str | None, Asked],
             listing: Listing) -> tuple[tuple, tuple[RunningJob, ...]]:
        """Returns the nodes and running jobs of a snapshot that plans as the
        full one does (see the module docstring), for a pass that may not
        reserve room: over all GPUs, or over each GPU type apart, with what
        the jobs accepting it ask for.

        `asks` is what the queue asks for, per GPU type (None: all of it, on
        a cluster without types); `listing` takes the jobs that may be
        victims in this pass.
        """
        world, tiers = self.world, self.tiers
        kinds: tuple[str | None, ...] = world.gpu_types or (None,)
        # Reclaim (R6) needs a preemptor whose team ends within nominal even
        # if all its preemptible jobs were gone; without one, no job of
        # another team can be a victim in this pass (per type: reclaim
        # takes only GPUs of the type the preemptor tries).
        reclaim = dict.fromkeys(kinds, False)
        for kind in kinds:
            for team, least in asks[kind].least.items():
                nominal, _, tier_gpus, _ = self._figures(cluster, team, kind)
                floor = sum(gpus for name, gpus in tier_gpus.items() if not tiers[name].preemptible)
                if floor + least <= nominal:
                    reclaim[kind] = True
                    break
        folded: list[RunningJob] = []
        for team in world.nominal:
            for kind in kinds:
                ask = asks[kind]
                nominal, used, tier_gpus, by_tier = self._figures(cluster, team, kind)
                suffix = "" if kind is None else f"-{kind}"
                # How far above nominal the team may end this pass: its usage
                # plus all it asks for (of this type: every job accepting it,
                # as if each got it). Above it, its jobs may be reclaimed.
                above = used + ask.queued.get(team, 0) - nominal if reclaim[kind] else 0
                own_below = ask.top.get(team)
                listed = 0
                if above > 0 or own_below is not None:
                    listed = listing.team(by_tier, tier_gpus, self.victim_tiers, above, own_below,
                                          bounded=not ask.mixed)
                steady = used - listed
                if above > 0:
                    # Preemptible jobs past the bound: never reached by reclaim, and
                    # of no tier lower than anything queued, but preemptible for R2.
                    rest = sum(tier_gpus.get(t.name, 0) for t in self.victim_tiers) - listed
                    if rest:
                        folded.append(RunningJob(f"~beyond-{team}{suffix}", team, BEYOND.name, now,
                                                 (ReplicaGroup(1, gpu=rest),), (NOWHERE,),
                                                 gpu_type=kind))
                        steady -= rest
                if steady:
                    folded.append(RunningJob(f"~quota-{team}{suffix}", team, FOLDED.name, 0,
                                             (ReplicaGroup(1, gpu=steady),), (NOWHERE,),
                                             gpu_type=kind))
        nodes = world.nodes
        running = listing.jobs
        free = cluster.free
        size = len(free.buckets) - 1
        keep = set(listing.on_node)
        for b in range(1, size):
            keep.update(free.buckets[b])
        everywhere = range(len(nodes))
        for kind in kinds:
            ask = asks[kind]
            within = everywhere if kind is None else self.ranges[kind]
            empty = _within(free.buckets[size], within)
            keep.update(empty[:ask.pods])
            # R10 places every job on the empty listed nodes of a type it
            # accepts: list enough of them (full ones, which take no
            # placement) for the widest gang, and one of each type at least.
            need = max(ask.widest, 1)
            have = len(keep) if kind is None else sum(1 for i in keep if i in within)
            for i in _within(free.buckets[0], within) + empty:
                if have >= need:
                    break
                if i not in keep:
                    keep.add(i)
                    have += 1
        kept = tuple(nodes[i] for i in sorted(keep))
        # What the listed jobs do not hold is folded: room per node (one
        # outside job per GPU type), quota per team.
        rooms: dict[str | None, dict[int, list[str]]] = {}
        for i in sorted(keep):
            gpus = nodes[i].gpu - free.gpu[i] - listing.on_node.get(i, 0)
            if gpus:
                rooms.setdefault(nodes[i].gpu_type, {}).setdefault(gpus, []).append(nodes[i].name)
        for kind, by_size in rooms.items():
            running.append(RunningJob(
                "~room" if kind is None else f"~room-{kind}", None, None, 0,
                tuple(ReplicaGroup(len(names), gpu=gpus) for gpus, names in by_size.items()),
                tuple(name for names in by_size.values() for name in names), gpu_type=kind))
        running.extend(folded)
        return kept, tuple(running)

    def _figures(self, cluster: Cluster, team: str,
                 kind: str | None) -> tuple[int, int, dict[str, int], dict[str, dict[str, Entry]]]:
        """Returns a team's nominal and usage of GPU type `kind` (None: all
        GPUs, on a cluster without types), its GPUs per tier and its running
        entries per tier."""
        if kind is None:
            return (self.world.nominal[team], cluster.used[team], cluster.tier_gpus[team],
                    cluster.by_tier[team])
        key = (team, kind)
        return (self.type_nominal[team][kind], cluster.team_type_used[key],
                cluster.type_tier_gpus[key], cluster.type_by_tier[key])


def _within(indices: list[int], nodes: range) -> list[int]:
    """Returns the node indices of sorted `indices` that fall in `nodes`."""
    return indices[bisect_left(indices, nodes.start):bisect_left(indices, nodes.stop)]
