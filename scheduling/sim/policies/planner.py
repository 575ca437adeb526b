"""`gangway` and `kueue-like`: the real admission policy, `plan`, on the
replayed cluster.

`gangway` is `plan` with default settings but the whole-cluster starvation
guard (`starvation_guard="hold"`): the replay's planner folds running jobs
it cannot preempt, so it does not yet carry the expected ends reservations
(R4) are computed from. `kueue-like` is `plan` configured
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
- the snapshot's queue is kept by the planner as jobs arrive, start, are
  rejected and are preempted, with counts of what it asks for per team, so
  a pass never walks the cluster's queue to build it;
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
# Preemptible usage no victim search can reach in a pass: the highest tier,
# so last in R8 order and never below a preemptor's tier.
BEYOND = Tier("~beyond", 10**9, preemptible=True)
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
    victim_tiers: tuple[Tier, ...] = ()  # the preemptible tiers, lowest first (R8)
    queue: _Queue | None = None

    def __post_init__(self) -> None:
        self.index = {n.name: i for i, n in enumerate(self.world.nodes)}
        self.queue = _Queue(self.tiers)
        self.victim_tiers = tuple(sorted((t for t in self.tiers.values() if t.preemptible),
                                         key=lambda t: t.value))
        if self.world.capacity > sum(self.world.nominal.values()):
            raise ValueError("the replay's reduced snapshots need every GPU in some team's nominal")

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        for entry in news.arrived:
            self.queue.add(entry)
        if not cluster.pending or self._unchanged(cluster, now, news):
            return
        self.passes += 1
        result = plan(self._snapshot(cluster, now), with_eta=False, with_waits=False)
        self.last_pass = now
        self.started = bool(result.admit)
        for rejection in result.reject:
            entry = cluster.pending[rejection.id]
            self.queue.remove(entry)
            act.reject(entry)
        for admission in result.admit:
            entry = cluster.pending[admission.id]
            victims = [cluster.running[v] for v in admission.victims]
            nodes = tuple(self.index[name] for name in admission.nodes)
            act.start(entry, nodes, admission.victims)
            self.queue.remove(entry)
            for victim in victims:
                self.queue.add(victim)  # queued again, with its old queue time
            self.starts.append(now)

    def _snapshot(self, cluster: Cluster, now: int) -> Snapshot:
        """Returns the reduced snapshot of this pass (see the module docstring)."""
        asked = self.queue.asked()
        nodes, running = self._reduced(cluster, now, asked)
        return Snapshot(now, nodes, tuple(self.tiers.values()) + (FOLDED, BEYOND),
                        self.world.teams, running, tuple(self.queue.jobs.values()), self.settings)

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

    def _reduced(self, cluster: Cluster, now: int,
                 asked: _Asked) -> tuple[tuple, tuple[RunningJob, ...]]:
        """Returns the nodes and running jobs of a snapshot that plans as the
        full one does (see the module docstring)."""
        world, nominal, tiers = self.world, self.world.nominal, self.tiers
        # Reclaim (R6) needs a preemptor whose team ends within nominal even
        # if all its preemptible jobs were gone; without one, no job of
        # another team can be a victim in this pass.
        reclaim = False
        for team, least in asked.least.items():
            floor = sum(gpus for name, gpus in cluster.tier_gpus[team].items()
                        if not tiers[name].preemptible)
            if floor + least <= nominal[team]:
                reclaim = True
                break
        listing = _Listing(world.nodes, now - self.settings.min_runtime_before_preemption)
        folded: list[RunningJob] = []
        for team in nominal:
            # How far above nominal the team may end this pass: its usage
            # plus all it asks for. Above it, its jobs may be reclaimed.
            above = (cluster.used[team] + asked.queued.get(team, 0) - nominal[team]
                     if reclaim else 0)
            own_below = asked.top.get(team)
            listed = 0
            if above > 0 or own_below is not None:
                listed = listing.team(cluster.by_tier[team], self.victim_tiers, above,
                                      own_below, bounded=not asked.mixed)
            steady = cluster.used[team] - listed
            if above > 0:
                # Preemptible jobs past the bound: never reached by reclaim, and
                # of no tier lower than anything queued, but preemptible for R2.
                rest = sum(cluster.tier_gpus[team].get(t.name, 0) for t in self.victim_tiers) - listed
                if rest:
                    folded.append(RunningJob(f"~beyond-{team}", team, BEYOND.name, now,
                                             (ReplicaGroup(1, gpu=rest),), (NOWHERE,)))
                    steady -= rest
            if steady:
                folded.append(RunningJob(f"~quota-{team}", team, FOLDED.name, 0,
                                         (ReplicaGroup(1, gpu=steady),), (NOWHERE,)))
        free = cluster.free
        size = len(free.buckets) - 1
        keep = set(listing.on_node)
        for b in range(1, size):
            keep.update(free.buckets[b])
        keep.update(free.buckets[size][:asked.pods])
        # R10 places every job on the empty listed nodes: list enough of them
        # (full ones, which take no placement) for the widest gang.
        for i in free.buckets[0] + free.buckets[size]:
            if len(keep) >= asked.widest:
                break
            keep.add(i)
        nodes = world.nodes
        kept = tuple(nodes[i] for i in sorted(keep))
        # What the listed jobs do not hold is folded: room per node, quota per team.
        by_size: dict[int, list[str]] = {}
        for i in sorted(keep):
            gpus = nodes[i].gpu - free.gpu[i] - listing.on_node.get(i, 0)
            if gpus:
                by_size.setdefault(gpus, []).append(nodes[i].name)
        running = listing.jobs
        if by_size:
            running.append(RunningJob(
                "~room", None, None, 0,
                tuple(ReplicaGroup(len(names), gpu=gpus) for gpus, names in by_size.items()),
                tuple(name for names in by_size.values() for name in names)))
        running.extend(folded)
        return kept, tuple(running)


@dataclass(slots=True)
class _Queue:
    """The queue as the snapshot lists it, kept up to date as jobs arrive,
    start, are rejected and are preempted, with counts that tell what it
    asks for without a pass over it."""

    tiers: dict[str, Tier]
    jobs: dict[str, PendingJob] = field(default_factory=dict)
    queued: dict[str, int] = field(default_factory=dict)  # team -> GPUs
    values: dict[str, dict[int, int]] = field(default_factory=dict)  # team -> tier value -> jobs
    sizes: dict[str, dict[int, int]] = field(default_factory=dict)  # team -> GPUs -> jobs
    widths: dict[int, int] = field(default_factory=dict)  # replicas -> jobs
    pods: int = 0
    mixed: int = 0  # jobs of several replica groups

    def add(self, entry: Entry) -> None:
        job = entry.cache.get("pending")
        if job is None:
            job = entry.cache["pending"] = PendingJob(
                entry.id, entry.team, entry.tier.name, entry.queued, replicas_of(entry.gpus))
        self.jobs[job.id] = job
        self._count(job, entry, 1)

    def remove(self, entry: Entry) -> None:
        self._count(self.jobs.pop(entry.id), entry, -1)

    def _count(self, job: PendingJob, entry: Entry, sign: int) -> None:
        team, gpus, width = job.team, entry.gpus, len(entry.pods)
        self.queued[team] = self.queued.get(team, 0) + sign * gpus
        _tally(self.values.setdefault(team, {}), self.tiers[job.tier].value, sign)
        _tally(self.sizes.setdefault(team, {}), gpus, sign)
        _tally(self.widths, width, sign)
        self.pods += sign * width
        self.mixed += sign * (len(job.replicas) > 1)

    def asked(self) -> _Asked:
        return _Asked(
            queued=self.queued,
            top={team: max(values) for team, values in self.values.items() if values},
            least={team: min(sizes) for team, sizes in self.sizes.items() if sizes},
            pods=self.pods, widest=max(self.widths, default=0), mixed=self.mixed > 0)


def _tally(counts: dict[int, int], key: int, sign: int) -> None:
    """Adds `sign` to a count, dropping it at zero (so max and min see only live keys)."""
    n = counts.get(key, 0) + sign
    if n:
        counts[key] = n
    else:
        del counts[key]


@dataclass(slots=True)
class _Asked:
    """What the queue asks for, per team and in all."""

    queued: dict[str, int] = field(default_factory=dict)  # GPUs
    top: dict[str, int] = field(default_factory=dict)  # highest tier value
    least: dict[str, int] = field(default_factory=dict)  # smallest job's GPUs
    pods: int = 0
    widest: int = 0  # most replicas of one job
    mixed: bool = False  # some job has several replica groups


@dataclass(slots=True)
class _Listing:
    """The running jobs a reduced snapshot lists, and their GPUs per node."""

    nodes: tuple
    since: int  # started at or before: past the thrash guard
    jobs: list[RunningJob] = field(default_factory=list)
    on_node: dict[int, int] = field(default_factory=dict)

    def team(self, running: dict[str, dict[str, Entry]], tiers: tuple[Tier, ...],
             above: int, own_below: int | None, *, bounded: bool) -> int:
        """Lists a team's jobs that may be victims in this pass; returns their GPUs.

        `running` is the team's running entries per tier in start order,
        `tiers` the preemptible tiers, lowest first (R8). When `above` > 0 the
        team may be reclaimed from: its jobs in R8 order while the GPUs
        listed before them are fewer than `above` (all of them when not
        `bounded`). When a queued job of the team has tier value `own_below`,
        its jobs of lower tiers past the thrash guard.
        """
        gpus = before = 0
        for tier in tiers:
            group = running.get(tier.name)
            if not group:
                continue
            entries = list(group.values())
            cut = len(entries)
            if above > 0:
                # Most recently started first, a whole second at a time, so
                # that jobs started together (R8 orders them by id) go together.
                while cut and (not bounded or before < above):
                    second = entries[cut - 1].started
                    while cut and entries[cut - 1].started == second:
                        cut -= 1
                        before += entries[cut].gpus
                gpus += self._add(entries[cut:])
            if own_below is not None and tier.value < own_below:
                k = 0
                while k < cut and entries[k].started <= self.since:
                    k += 1
                gpus += self._add(entries[:k])
        return gpus

    def _add(self, entries: list[Entry]) -> int:
        nodes, on_node = self.nodes, self.on_node
        gpus = 0
        for entry in entries:
            job = entry.cache.get("running")
            if job is None or job.started != entry.started:
                job = entry.cache["running"] = RunningJob(
                    entry.id, entry.team, entry.tier.name, entry.started,
                    replicas_of(entry.gpus), tuple(nodes[i].name for i in entry.nodes),
                    queued=entry.queued)
            self.jobs.append(job)
            gpus += entry.gpus
            for k, i in enumerate(entry.nodes):
                on_node[i] = on_node.get(i, 0) + entry.pods[k]
        return gpus


def gangway(world: World) -> Planner:
    return Planner("gangway", world, Settings(starvation_guard="hold"),
                   {t.name: t for t in world.tiers})


def kueue_like(world: World) -> Planner:
    tiers = {t.name: Tier(t.name, t.value, preemptible=True) for t in world.tiers}
    return Planner("kueue-like", world,
                   Settings(starvation_after=NO_GUARD, min_runtime_before_preemption=0), tiers)
