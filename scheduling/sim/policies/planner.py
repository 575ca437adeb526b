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

- a pass is skipped when it would start nothing (quiet.py);
- the snapshot lists as running jobs only those that could be victims in
  this pass, and only the nodes that matter; every other running job is
  folded into usage no victim search reaches (reduced.py), over all GPUs
  or, with GPU types (`--types`), over each type apart;
- a pass that may reserve room lists every node and every running job,
  kept from pass to pass in the policy's `Standing` (running.py), which
  `plan` reads instead of going over the running jobs;
- the snapshot's queue is kept by the planner as jobs arrive, start, are
  rejected and are preempted, with counts of what it asks for per team, so
  a pass never walks the cluster's queue to build it, and in R3's order,
  which `plan` takes instead of sorting it (queue.py).

`tests/sim/test_replay_invariants.py` replays with and without these
shortcuts and requires the same outcome; `tests/sim/test_replay_standing.py`
checks the kept running jobs (running.py) against the cluster's in every
reserving pass.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.policy import RunningJob, Settings, Snapshot, Standing, Tier, plan
from scheduling.policy.order import R3Queue

from ..engine import Actions, Cluster, Entry, News
from ..runtimes import Runtimes
from ..world import World, replicas_of
from .listing import Listing
from .queue import Asked, Queue
from .quiet import Arrivals
from .reduced import BEYOND, FOLDED, Reduction
from .running import Running

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
    # Every running job as a reserving pass lists it; None without reservations.
    running: Running | None = None
    # With GPU types: each type's nodes, and team -> type -> nominal GPUs.
    ranges: dict[str, range] = field(default_factory=dict)
    type_nominal: dict[str, dict[str, int]] = field(default_factory=dict)
    # Whether a new job may act (quiet.py), and how a pass's snapshot is cut (reduced.py).
    arrivals: Arrivals | None = None
    reduction: Reduction | None = None

    def __post_init__(self) -> None:
        world = self.world
        self.index = {n.name: i for i, n in enumerate(world.nodes)}
        self.queue = Queue(self.tiers, R3Queue(self._tiers()), self.runtimes, type_of=world.type_of)
        if self.reserve:
            self.running = Running(Standing(world.nodes, self._tiers(), self.settings),
                                   self.running_jobs, self.runtimes, self.checkpoints)
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
        self.arrivals = Arrivals(world=world, tiers=self.tiers, ranges=self.ranges,
                                 type_nominal=self.type_nominal)
        self.reduction = Reduction(world=world, tiers=self.tiers, victim_tiers=self.victim_tiers,
                                   ranges=self.ranges, type_nominal=self.type_nominal)

    @property
    def reserve(self) -> bool:
        return self.settings.starvation_guard == "reserve"

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None:
        running = self.running
        if running is not None:
            for entry in news.finished:
                running.stop(entry)
        if self.runtimes is not None:
            for entry in news.finished:
                # The loop learns from the last run, start to finish.
                key = self.runtimes.learn(entry, now - entry.started)
                if key is not None:
                    self.queue.relearn(key)
                    if running is not None:
                        running.relearn(key)
        for entry in news.arrived:
            self.queue.add(entry)
        if not cluster.pending or self._unchanged(cluster, now, news):
            return
        self.passes += 1
        # The standing is read only when the snapshot lists its running jobs;
        # the queue, whose order the snapshot lists, saves sorting it.
        result = plan(self._snapshot(cluster, now), with_eta=False, with_waits=False,
                      standing=None if running is None else running.standing,
                      queue=self.queue.jobs)
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
            if running is not None:
                for victim in victims:
                    running.stop(victim)
                running.start(cluster, entry, now)  # a plan places the whole gang: it runs now
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
        """Returns the snapshot of this pass: every node and running job when
        it may reserve room, else the reduced one (reduced.py)."""
        if self._may_reserve(now):
            self.running.update(cluster, now)
            nodes, running = self.world.nodes, self.running.standing.running
        else:
            nodes, running = self._reduced(cluster, now, self.queue.asked())
        return Snapshot(now, nodes, self._tiers(), self.world.teams, running,
                        self.queue.jobs.pending, self.settings, self.reservations,
                        self.world.gpu_types)

    def _tiers(self) -> tuple[Tier, ...]:
        """Returns the tiers of this planner's snapshots, with those of folded usage."""
        return tuple(self.tiers.values()) + (FOLDED, BEYOND)

    def _may_reserve(self, now: int) -> bool:
        """Returns whether a pass at `now` may reserve room: some queued job
        waited longer than `starvation_after`, under reservations."""
        return self.reserve and self.queue.starving(now - self.settings.starvation_after) > 0

    def running_jobs(self, cluster: Cluster, entries: list[Entry], now: int) -> list[RunningJob]:
        """Returns `entries` as the snapshot lists them, with their runtimes
        and last checkpoints when this planner reports them."""
        # Called for every listed job in every pass: reads only caches
        # unless the job started again, checkpointed or got a new estimate.
        # A run keeps its start, nodes and GPU type; its next checkpoint is
        # when its last one changes.
        runtimes = self.runtimes
        learned = None if runtimes is None else runtimes.learned
        key = Runtimes.key
        found = []
        for entry in entries:
            cache = entry.cache
            estimate = None if learned is None else learned.get(key(entry))
            kept = cache.get("running")  # (job, run, valid until)
            if kept is not None and kept[1] == entry.run and now < kept[2] and kept[0].estimate == estimate:
                found.append(kept[0])
                continue
            checkpointed = self.checkpointed(cluster, entry, now) if self.checkpoints else None
            until = cache["checkpoint"][1] if self.checkpoints else NEVER
            job = None if kept is None or kept[1] != entry.run else kept[0]
            if job is None:
                names = self.world.nodes
                job = RunningJob(
                    entry.id, entry.team, entry.tier.name, entry.started,
                    replicas_of(entry.gpus), tuple(names[i].name for i in entry.nodes),
                    max_runtime=None if runtimes is None else runtimes.max_runtime(entry),
                    queued=entry.queued, estimate=estimate, checkpointed=checkpointed,
                    gpu_type=entry.gpu_type)
            elif job.estimate != estimate or job.checkpointed != checkpointed:
                # The same run, with a new estimate or a new last checkpoint.
                job = RunningJob(job.id, job.team, job.tier, job.started, job.replicas, job.nodes,
                                 job.max_runtime, job.queued, estimate, checkpointed, job.gpu_type)
            cache["running"] = (job, entry.run, until)
            found.append(job)
        return found

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
        """Returns True when this pass would start nothing, by the rules in
        quiet.py; False when it might start something."""
        if self.last_pass is None or news.freed or self.started:
            return False
        if self.reserve and self.queue.starving(now - self.settings.starvation_after) > self.starving:
            return False  # a job starts starving: it may reserve room
        guard = self.settings.min_runtime_before_preemption
        if guard and bisect_right(self.starts, now - guard) > bisect_right(self.starts, self.last_pass - guard):
            return False  # a job passed the thrash guard: it may now be a victim
        return not any(self.arrivals.may_act(cluster, entry) for entry in news.arrived)

    def _reduced(self, cluster: Cluster, now: int,
                 asked: Asked) -> tuple[tuple, tuple[RunningJob, ...]]:
        """Returns the nodes and running jobs of a snapshot that plans as the
        full one does (reduced.py): over all GPUs, or over each GPU type
        apart, with what the jobs accepting it ask for."""
        kinds = self.world.gpu_types
        asks = {None: asked} if not kinds else {kind: self.queue.asked(kind) for kind in kinds}
        listing = Listing(now - self.settings.min_runtime_before_preemption,
                          lambda entries: self.running_jobs(cluster, entries, now),
                          self._mark(cluster, now))
        return self.reduction.fold(cluster, now, asks, listing)

    def _mark(self, cluster: Cluster, now: int) -> Callable[[list[Entry]], list[int]] | None:
        """Returns what gives, for running entries, the time each one's
        unsaved work counts from (R8) in a pass at `now`, when this planner
        reports checkpoints; None when it does not (R8 then counts from the
        start)."""
        if not self.checkpoints:
            return None
        checkpointed = self.checkpointed

        def marks(entries: list[Entry]) -> list[int]:
            # R8: unsaved work since the last checkpoint, else the start.
            # Read for every job of a team reclaim may reach, in every
            # pass: the cached checkpoint is read here while it holds.
            found = []
            for entry in entries:
                cached = entry.cache.get("checkpoint")  # (run, next checkpoint, last)
                if cached is None or cached[0] != entry.run or now >= cached[1]:
                    found.append(checkpointed(cluster, entry, now) or entry.started)
                else:
                    found.append(cached[2] or entry.started)
            return found
        return marks


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
