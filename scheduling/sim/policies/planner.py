"""`gangway`, `gangway-hold` and `kueue-like`: the real admission policy,
`plan`, on the replayed cluster.

`gangway` is `plan` with default settings, as the admission loop runs it:
R4's reservations (carried from one plan into the next snapshot), R14's
runtimes as `--estimates` fills them (runtimes.py; learned from successes
by default), and R8's unsaved work from the checkpoints a live job would
report (the engine's, every `--checkpoint-interval` seconds of progress).
`gangway-hold` is the older guard kept for comparison: a job starved for
room holds the whole cluster (`starvation_guard="hold"`); it reports no
runtimes and no checkpoints, as gangway did before reservations. `kueue-like` is `plan` configured
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
  fewer nodes leave no unassigned capacity to borrow either way;
- with reservations, a pass where some queued job has waited longer than
  `starvation_after` may reserve room, and a reservation is the earliest
  time room frees on any node as running jobs end when expected (R14). Such
  a pass lists every node, and the running jobs it does not list as
  victims are outside usage (R12), one outside job per expected end
  holding on each node the GPUs of the jobs that end then (the search for
  the earliest start frees the room of every job ending at one time before
  it tries to place), so room frees on the same nodes at the same times as
  in the full snapshot; only the quota side stays folded (a reservation
  is about room; quota is judged now). The groups by expected end are
  kept from pass to pass (ends.py), changed as jobs start, end, are
  preempted, get a new estimate or come on or off the list of victims, so
  a pass does not walk the running jobs; which order the outside jobs and
  their nodes come in changes no plan (room and quota are sums, and
  holders are ordered by R8's key, which ends in the id). Without such a
  job no pass reserves anything, and ends are not read. A pass is also due
  when a queued job starts starving, since it may then reserve room.
  Victims are listed in R8's order with checkpoints: least unsaved work
  first.

`tests/sim/test_replay_invariants.py` replays with and without these
shortcuts and requires the same outcome; `tests/sim/test_replay_ends.py`
checks the kept groups against a walk over the running jobs in every
reserving pass.

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
  type's nodes as the full snapshot does;
- a pass is skipped on the same conditions, with the test for a new job
  made per type it accepts: free room on that type's nodes, a rejection by
  R10 there (its nominal, for a non-preemptible job, or the type's GPUs),
  or reclaim in that type.

`test_reduced_snapshots_plan_as_the_full_ones_on_a_cluster_of_gpu_types`
replays typed clusters both ways and requires the same outcome.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from scheduling.policy import ReplicaGroup, RunningJob, Settings, Snapshot, Tier, plan

from ..engine import Actions, Cluster, Entry, News
from ..runtimes import Runtimes
from ..world import World, replicas_of
from .ends import Ends
from .listing import Listing
from .queue import Asked, Queue

FOLDED = Tier("~folded", -1, preemptible=False)
# Preemptible usage no victim search can reach in a pass: the highest tier,
# so last in R8 order and never below a preemptor's tier.
BEYOND = Tier("~beyond", 10**9, preemptible=True)
NOWHERE = "~nowhere"
NO_GUARD = 10**12
NEVER = 1 << 62  # a time no replay reaches


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
    queue: Queue | None = None
    # R14's runtimes in snapshots; None: none (every job runs default_runtime).
    runtimes: Runtimes | None = None
    checkpoints: bool = False  # report the running jobs' checkpoints (R8)
    reservations: tuple = ()  # the last plan's, carried into the next snapshot (R4)
    starving: int = 0  # queued jobs past starvation_after at the last pass
    # The running jobs by expected end, for reserving passes; None without reservations.
    ends: Ends | None = None
    # With GPU types: each type's nodes, and team -> type -> nominal GPUs.
    ranges: dict[str, range] = field(default_factory=dict)
    type_nominal: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        world = self.world
        self.index = {n.name: i for i, n in enumerate(world.nodes)}
        self.queue = Queue(self.tiers, self.runtimes, type_of=world.type_of)
        if self.reserve:
            self.ends = Ends(world, self.settings, self.runtimes)
        self.victim_tiers = tuple(sorted((t for t in self.tiers.values() if t.preemptible),
                                         key=lambda t: t.value))
        if world.capacity > sum(world.nominal.values()):
            raise ValueError("the replay's reduced snapshots need every GPU in some team's nominal")
        self.ranges = {kind: world.nodes_of(kind) for kind in world.gpu_types}
        self.type_nominal = {t.name: {kind: world.type_nominal(t.name, kind) for kind in world.gpu_types}
                             for t in world.teams}
        for kind, nodes in self.ranges.items():
            if (sum(world.nodes[i].gpu for i in nodes)
                    > sum(quota[kind] for quota in self.type_nominal.values())):
                raise ValueError(f"the replay's reduced snapshots need every {kind} GPU in some "
                                 f"team's nominal of {kind}")

    @property
    def reserve(self) -> bool:
        return self.settings.starvation_guard == "reserve"

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        ends = self.ends
        if ends is not None:
            for entry in news.finished:
                ends.stop(entry)
        if self.runtimes is not None:
            for entry in news.finished:
                # The loop learns from the last run, start to finish.
                key = self.runtimes.learn(entry, now - entry.started)
                if key is not None:
                    self.queue.relearn(key)
                    if ends is not None:
                        ends.relearn(key)
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
            if ends is not None:
                for victim in victims:
                    ends.stop(victim)
                ends.start(entry)  # a plan places the whole gang: it runs now
            self.starts.append(now)
        if self.reserve:
            self.starving = self.queue.starving(now - self.settings.starvation_after)
            if result.reservations or self.reservations:
                act.reserve(self._reserved(cluster, result.reservations))
            self.reservations = result.reservations

    def _reserved(self, cluster: Cluster, reservations) -> dict[int, int]:
        """Returns the GPUs `reservations` hold, node index -> GPUs."""
        gpus: dict[int, int] = {}
        for reservation in reservations:
            pods = cluster.pending[reservation.id].pods
            for k, name in enumerate(reservation.nodes):
                i = self.index[name]
                gpus[i] = gpus.get(i, 0) + pods[k]
        return gpus

    def _snapshot(self, cluster: Cluster, now: int) -> Snapshot:
        """Returns the reduced snapshot of this pass (see the module docstring)."""
        asked = self.queue.asked()
        nodes, running = self._reduced(cluster, now, asked)
        return Snapshot(now, nodes, tuple(self.tiers.values()) + (FOLDED, BEYOND),
                        self.world.teams, running, tuple(self.queue.jobs.values()), self.settings,
                        self.reservations, self.world.gpu_types)

    def _may_reserve(self, now: int) -> bool:
        """Returns whether a pass at `now` may reserve room: some queued job
        waited longer than `starvation_after`, under reservations."""
        return self.reserve and self.queue.starving(now - self.settings.starvation_after) > 0

    def running_job(self, cluster: Cluster, entry: Entry, now: int) -> RunningJob:
        """Returns `entry` as the snapshot lists it, with its runtimes and
        last checkpoint when this planner reports them."""
        # Called for every listed job in every pass: reads only caches
        # unless the job started again, checkpointed or got a new estimate.
        # A run keeps its start, nodes and GPU type; its next checkpoint is
        # when its last one changes.
        cache = entry.cache
        runtimes = self.runtimes
        estimate = None if runtimes is None else runtimes.learned.get(runtimes.key(entry))
        kept = cache.get("running")  # (job, run, valid until)
        if kept is not None and kept[1] == entry.run and now < kept[2] and kept[0].estimate == estimate:
            return kept[0]
        checkpointed = self.checkpointed(cluster, entry, now) if self.checkpoints else None
        until = cache["checkpoint"][1] if self.checkpoints else NEVER
        job = None if kept is None or kept[1] != entry.run else kept[0]
        if job is None or job.estimate != estimate or job.checkpointed != checkpointed:
            names = self.world.nodes
            job = RunningJob(
                entry.id, entry.team, entry.tier.name, entry.started,
                replicas_of(entry.gpus), tuple(names[i].name for i in entry.nodes),
                max_runtime=None if runtimes is None else runtimes.max_runtime(entry),
                queued=entry.queued, estimate=estimate, checkpointed=checkpointed,
                gpu_type=entry.gpu_type)
        cache["running"] = (job, entry.run, until)
        return job

    @staticmethod
    def checkpointed(cluster: Cluster, entry: Entry, now: int) -> int | None:
        """Returns the engine's last checkpoint of running `entry`, read
        again only once its next checkpoint is due."""
        cached = entry.cache.get("checkpoint")  # (run, next checkpoint, last)
        if cached is None or cached[0] != entry.run or now >= cached[1]:
            cached = entry.cache["checkpoint"] = (
                entry.run, cluster.next_checkpoint(entry, now), cluster.checkpointed(entry, now))
        return cached[2]

    def _unchanged(self, cluster: Cluster, now: int, news: News) -> bool:
        """Returns True when this pass would start nothing, by the rules in the
        module docstring; False when it might start something."""
        if self.last_pass is None or news.freed or self.started:
            return False
        if self.reserve and self.queue.starving(now - self.settings.starvation_after) > self.starving:
            return False  # a job starts starving: it may reserve room
        guard = self.settings.min_runtime_before_preemption
        if guard and bisect_right(self.starts, now - guard) > bisect_right(self.starts, self.last_pass - guard):
            return False  # a job passed the thrash guard: it may now be a victim
        return not any(self._may_act(cluster, entry) for entry in news.arrived)

    def _may_act(self, cluster: Cluster, entry: Entry) -> bool:
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
        checks of `_may_act`, each on one type's nodes and quota."""
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

    def _reduced(self, cluster: Cluster, now: int,
                 asked: Asked) -> tuple[tuple, tuple[RunningJob, ...]]:
        """Returns the nodes and running jobs of a snapshot that plans as the
        full one does (see the module docstring): over all GPUs, or over
        each GPU type apart, with what the jobs accepting it ask for."""
        world, tiers = self.world, self.tiers
        kinds: tuple[str | None, ...] = world.gpu_types or (None,)
        asks = {None: asked} if not world.gpu_types else {
            kind: self.queue.asked(kind) for kind in kinds}
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
        mark = None
        if self.checkpoints:
            checkpointed = self.checkpointed

            def mark(entry: Entry) -> int:
                # R8: unsaved work since the last checkpoint, else the start.
                # Read for every job of a team reclaim may reach, in every
                # pass: the cached checkpoint is read here while it holds.
                cached = entry.cache.get("checkpoint")  # (run, next checkpoint, last)
                if cached is None or cached[0] != entry.run or now >= cached[1]:
                    return checkpointed(cluster, entry, now) or entry.started
                return cached[2] or entry.started
        listing = Listing(now - self.settings.min_runtime_before_preemption,
                           lambda entry: self.running_job(cluster, entry, now), mark)
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
                    listed = listing.team(by_tier, self.victim_tiers, above, own_below,
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
        if self._may_reserve(now):
            # Every node, and every running job's room with its expected end.
            running.extend(self.ends.outside(now, listing.ids))
            running.extend(folded)
            return nodes, tuple(running)
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


def _within(indices: list[int], nodes: range) -> list[int]:
    """Returns the node indices of sorted `indices` that fall in `nodes`."""
    return indices[bisect_left(indices, nodes.start):bisect_left(indices, nodes.stop)]


def _count(indices: list[int], nodes: range) -> int:
    """Returns how many of sorted `indices` fall in `nodes`."""
    return bisect_left(indices, nodes.stop) - bisect_left(indices, nodes.start)


# The settings `--set` may change, for the policies that run `plan` as the
# loop does (gangway, gangway-hold); kueue-like keeps Kueue's defaults.
TUNABLE = ("starvation_after", "min_runtime_before_preemption", "default_runtime",
           "max_reservations", "reservation_slack")


def gangway(world: World, overrides: tuple[tuple[str, int], ...] = ()) -> Planner:
    settings = Settings(**dict(overrides))
    return Planner(_named("gangway", overrides), world, settings,
                   {t.name: t for t in world.tiers},
                   runtimes=Runtimes(world.estimates, settings.default_runtime),
                   checkpoints=True)


def gangway_hold(world: World, overrides: tuple[tuple[str, int], ...] = ()) -> Planner:
    return Planner(_named("gangway-hold", overrides), world,
                   Settings(**dict(overrides), starvation_guard="hold"),
                   {t.name: t for t in world.tiers})


def _named(name: str, overrides: tuple[tuple[str, int], ...]) -> str:
    """Returns a policy's name as its rows show it: with the settings it
    replays under when they are not the defaults."""
    if not overrides:
        return name
    return f"{name}[{','.join(f'{key}={value}' for key, value in overrides)}]"


def kueue_like(world: World) -> Planner:
    tiers = {t.name: Tier(t.name, t.value, preemptible=True) for t in world.tiers}
    return Planner("kueue-like", world,
                   Settings(starvation_after=NO_GUARD, min_runtime_before_preemption=0), tiers)
