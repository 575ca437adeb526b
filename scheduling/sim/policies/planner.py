"""`gangway` and `kueue-like`: the real admission policy, `plan`, on the
replayed cluster.

`gangway` is `plan` with default settings. `kueue-like` is `plan` configured
as Kueue's defaults with reclaim turned on: no starvation guard (best-effort
FIFO backfill), no thrash guard, and every tier preemptible (a Kueue priority
class orders work but never protects it); victims in Kueue's order (other
queues' borrowed work first, then lower priority, then most recently
started), which is also R8's. What it keeps of Gangway: fair borrowing (R9)
orders teams competing for idle quota, where Kueue without fair sharing
orders non-borrowing work first.

Speed, with the same plans as calling `plan` on the full snapshot every
second something happens:

- no pass when the queue is empty, or when the previous pass started
  nothing and since then nothing ended, no thrash guard expired and no new
  job could fit or preempt (it has no room and no victim it could take);
- the snapshot lists as running jobs only those that could be victims in
  this pass: preemptible jobs of a team that may end the pass above its
  nominal (usage + queued > nominal) while some team could reclaim (usage
  without its preemptible jobs + its smallest queued job <= nominal), and
  preemptible jobs of a lower tier than a queued job of their own team, past
  the thrash guard (R5). Every other job is folded into usage that is never
  a victim: per node, outside usage (R12: room without quota), and per team,
  usage of a non-preemptible tier on no listed node (quota without room);
- the snapshot lists only the nodes that matter: those of listed jobs, those
  with some GPUs free, and as many empty ones, first in node order, as the
  queue has replicas (best fit takes empty nodes in node order, so no pass
  reaches further), at least as many as the widest gang (R10 places each
  job on the empty listed nodes). Every GPU is in some team's nominal, so
  fewer nodes leave no unassigned capacity to borrow either way.

`tests/sim/test_replay_invariants.py` replays with and without these
shortcuts and requires the same outcome.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from scheduling.policy import PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Tier, plan

from ..engine import Actions, Cluster, Entry, News
from ..world import World, replicas_of

FOLDED = Tier("~folded", -1, preemptible=False)
NOWHERE = "~nowhere"
NO_GUARD = 10**12


@dataclass(slots=True)
class Planner:
    name: str
    world: World
    settings: Settings
    tiers: dict[str, Tier]
    index: dict[str, int] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)  # start times, in order
    last_pass: int | None = None
    started: bool = False  # did the last pass start anything?
    passes: int = 0

    def __post_init__(self) -> None:
        self.index = {n.name: i for i, n in enumerate(self.world.nodes)}
        if self.world.capacity > sum(self.world.nominal.values()):
            raise ValueError("the replay's reduced snapshots need every GPU in some team's nominal")

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        if not cluster.pending or self._unchanged(cluster, now, news):
            return
        self.passes += 1
        nodes, running = self._reduced(cluster, now)
        snapshot = Snapshot(now, nodes, tuple(self.tiers.values()) + (FOLDED,),
                            self.world.teams, running, self._pending(cluster), self.settings)
        result = plan(snapshot, with_eta=False, with_waits=False)
        self.last_pass = now
        self.started = bool(result.admit)
        for rejection in result.reject:
            act.reject(cluster.pending[rejection.id])
        for admission in result.admit:
            entry = cluster.pending[admission.id]
            nodes = tuple(self.index[name] for name in admission.nodes)
            act.start(entry, nodes, admission.victims)
            self.starts.append(now)

    def _unchanged(self, cluster: Cluster, now: int, news: News) -> bool:
        """Returns True when this pass would start nothing, by the rules in the
        module docstring; False when it might start something."""
        if self.last_pass is None or news.freed or self.started:
            return False
        guard = self.settings.min_runtime_before_preemption
        if guard and bisect_right(self.starts, now - guard) > bisect_right(self.starts, self.last_pass - guard):
            return False  # a job passed the thrash guard: it may now be a victim
        return not any(self._may_act(cluster, entry) for entry in news.arrived)

    def _may_act(self, cluster: Cluster, entry: Entry) -> bool:
        """Returns False only when `entry` can neither be placed nor take a victim now."""
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
        return any(self.tiers[name].value < tier.value and self.tiers[name].preemptible
                   for name, gpus in cluster.tier_gpus[team].items() if gpus)

    def _pending(self, cluster: Cluster) -> tuple[PendingJob, ...]:
        jobs = []
        for entry in cluster.pending.values():
            job = entry.cache.get("pending")
            if job is None:
                job = entry.cache["pending"] = PendingJob(
                    entry.id, entry.team, entry.tier.name, entry.queued, replicas_of(entry.gpus))
            jobs.append(job)
        return tuple(jobs)

    def _reduced(self, cluster: Cluster, now: int) -> tuple[tuple, tuple[RunningJob, ...]]:
        """Returns the nodes and running jobs of a snapshot that plans as the
        full one does (see the module docstring)."""
        world, nominal, tiers = self.world, self.world.nominal, self.tiers
        queued: dict[str, int] = {}
        top: dict[str, int] = {}
        least: dict[str, int] = {}
        pods = widest = 0
        for entry in cluster.pending.values():
            team = entry.team
            widest = max(widest, len(entry.pods))
            queued[team] = queued.get(team, 0) + entry.gpus
            top[team] = max(top.get(team, -1), tiers[entry.tier.name].value)
            least[team] = min(least.get(team, entry.gpus), entry.gpus)
            pods += len(entry.pods)
        # Reclaim (R6) needs a preemptor whose team ends within nominal even
        # if all its preemptible jobs were gone; without one, no job of
        # another team can be a victim in this pass.
        reclaim = False
        for team in least:
            floor = sum(gpus for name, gpus in cluster.tier_gpus[team].items()
                        if not tiers[name].preemptible)
            if floor + least[team] <= nominal[team]:
                reclaim = True
                break
        may_exceed = {t for t, used in cluster.used.items()
                      if reclaim and used + queued.get(t, 0) > nominal[t]}
        since = now - self.settings.min_runtime_before_preemption
        nodes = world.nodes
        listed = []
        keep = set()
        listed_on: dict[int, int] = {}
        listed_gpus = dict.fromkeys(nominal, 0)
        for team in (t for t in nominal if t in may_exceed or t in top):
            for entry in cluster.by_team[team].values():
                tier = tiers[entry.tier.name]
                if not tier.preemptible or (team not in may_exceed and not (
                        tier.value < top[team] and entry.started <= since)):
                    continue
                job = entry.cache.get("running")
                if job is None or job.started != entry.started:
                    job = entry.cache["running"] = RunningJob(
                        entry.id, team, entry.tier.name, entry.started,
                        replicas_of(entry.gpus), tuple(nodes[i].name for i in entry.nodes),
                        queued=entry.queued)
                listed.append(job)
                listed_gpus[team] += entry.gpus
                for k, i in enumerate(entry.nodes):
                    listed_on[i] = listed_on.get(i, 0) + entry.pods[k]
        free = cluster.free
        size = len(free.buckets) - 1
        keep.update(listed_on)
        for b in range(1, size):
            keep.update(free.buckets[b])
        keep.update(free.buckets[size][:pods])
        # R10 places every job on the empty listed nodes: list enough of them
        # (full ones, which take no placement) for the widest gang.
        for i in free.buckets[0] + free.buckets[size]:
            if len(keep) >= widest:
                break
            keep.add(i)
        kept = tuple(nodes[i] for i in sorted(keep))
        # What the listed jobs do not hold is folded: room per node, quota per team.
        by_size: dict[int, list[str]] = {}
        for i in sorted(keep):
            gpus = nodes[i].gpu - free.gpu[i] - listed_on.get(i, 0)
            if gpus:
                by_size.setdefault(gpus, []).append(nodes[i].name)
        if by_size:
            listed.append(RunningJob(
                "~room", None, None, 0,
                tuple(ReplicaGroup(len(names), gpu=gpus) for gpus, names in by_size.items()),
                tuple(name for names in by_size.values() for name in names)))
        folded_quota = {t: cluster.used[t] - listed_gpus[t] for t in nominal}
        for team, gpus in folded_quota.items():
            if gpus:
                    listed.append(RunningJob(f"~quota-{team}", team, FOLDED.name, 0,
                                         (ReplicaGroup(1, gpu=gpus),), (NOWHERE,)))
        return kept, tuple(listed)


def gangway(world: World) -> Planner:
    return Planner("gangway", world, Settings(), {t.name: t for t in world.tiers})


def kueue_like(world: World) -> Planner:
    tiers = {t.name: Tier(t.name, t.value, preemptible=True) for t in world.tiers}
    return Planner("kueue-like", world,
                   Settings(starvation_after=NO_GUARD, min_runtime_before_preemption=0), tiers)
