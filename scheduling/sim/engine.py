"""The replay: a virtual clock, the cluster's state and the event loop.

Each second at which something happens is one step, in a fixed order:

1. jobs that end at this second finish (in submit order) and free their GPUs;
2. jobs submitted at this second join the queue (in file order);
3. one admission pass: the policy starts jobs through `Actions` (after
   preempting their victims) and rejects what can never run; victims stop
   now, lose the work since their last checkpoint, and queue again with
   their old queue time.

On a cluster with GPU types (world.py) every pod of a job lands on nodes of
one type, one the job accepts: the engine refuses any other placement, so
a policy that breaks the rule fails loudly instead of skewing the figures.
GPUs in use are counted per type too.

Nothing happens between events, so the clock jumps from one to the next.
When nothing runs, nothing arrives and the pass starts nothing, no job can
ever start again: the replay ends there and records a deadlock. The engine
knows nothing of any policy beyond `Policy.admit`, and no Django.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.policy import Tier

from .metrics import Ledger, Outcome
from .placement import Free
from .trace import TraceJob
from .world import World, pods_of, restart_overhead


@dataclass(slots=True)
class Entry:
    """A job's replay state. `nodes` holds the node of each placed pod; a job
    runs once every pod is placed. `cache` is for the policy's own use."""

    job: TraceJob
    tier: Tier
    pods: tuple[int, ...]
    queued: int
    remaining: int
    pending_since: int
    nodes: list[int] = field(default_factory=list)
    overhead: int = 0
    started: int | None = None
    first_start: int | None = None
    waited: int = 0
    preemptions: int = 0
    run: int = 0
    # The GPU type its pods hold (its first pod's node's); None while none is
    # placed, and always on a cluster without types.
    gpu_type: str | None = None
    cache: dict = field(default_factory=dict)
    # The job's id, team and GPUs, as plain attributes: a policy reads them
    # for every listed job in every pass.
    id: str = field(init=False)
    team: str = field(init=False)
    gpus: int = field(init=False)

    def __post_init__(self) -> None:
        self.id, self.team, self.gpus = self.job.id, self.job.team, self.job.gpus


@dataclass(frozen=True, slots=True)
class News:
    """What changed since the previous admission pass: whether GPUs were
    freed, the jobs that arrived, and the jobs that finished (succeeded)."""

    freed: bool
    arrived: tuple[Entry, ...]
    finished: tuple[Entry, ...] = ()


class Actions(Protocol):
    """What a policy may do during its pass; each takes effect at once, so
    later decisions of the same pass see it."""

    def start(self, entry: Entry, nodes: tuple[int, ...], victims: tuple[str, ...] = ()) -> None:
        """Stops `victims`, then places the next pods of `entry` on `nodes`."""

    def reject(self, entry: Entry) -> None:
        """Drops a job that can never be admitted."""

    def reserve(self, gpus: dict[int, int]) -> None:
        """Records the room now reserved (R4), node -> GPUs, replacing the last."""


class Policy(Protocol):
    name: str

    def admit(self, cluster: Cluster, now: int, news: News, act: Actions) -> None: ...


class Cluster:
    """The replayed cluster: free GPUs, queue (in arrival order), running jobs,
    and per-team GPUs in use and asked for. Policies read it; the engine alone
    changes it."""

    def __init__(self, world: World, checkpoint_interval: int = 1800) -> None:
        self.world = world
        self.checkpoint_interval = checkpoint_interval
        self.free = Free(len(world.nodes), world.nodes[0].gpu if world.nodes else 8)
        self.pending: dict[str, Entry] = {}
        self.running: dict[str, Entry] = {}
        self.used = {t.name: 0 for t in world.teams}
        self.demand = {t.name: 0 for t in world.teams}
        self.partial = 0  # GPUs held by pods of jobs not yet running
        self.partial_by_team = {t.name: 0 for t in world.teams}
        # team -> tier name -> GPUs of running jobs: lets a policy tell at a
        # glance whether a team has lower-tier work it could preempt, and how
        # much of its usage a preemption could never free.
        self.tier_gpus: dict[str, dict[str, int]] = {t.name: {} for t in world.teams}
        # team -> tier name -> running entries by id, in start order (a job
        # started again after a preemption goes last): the most recently
        # started are last, as a victim search wants them first.
        self.by_tier: dict[str, dict[str, dict[str, Entry]]] = {t.name: {} for t in world.teams}
        # node -> GPUs reserved (R4) by the last admission pass.
        self.reserved: dict[int, int] = {}
        # GPU type -> GPUs of running jobs, and (team, type) -> the same per
        # team: the ledger's usage per type and the typed baselines' quotas.
        self.type_used = dict.fromkeys(world.gpu_types, 0)
        self.team_type_used: dict[tuple[str, str], int] = {
            (t.name, kind): 0 for t in world.teams for kind in world.gpu_types}
        # (team, GPU type) -> tier name -> GPUs and running entries by id, in
        # start order: `tier_gpus` and `by_tier` of each type, which the
        # planner's reduced snapshots read per type (reclaim is per type).
        self.type_tier_gpus: dict[tuple[str, str], dict[str, int]] = {
            key: {} for key in self.team_type_used}
        self.type_by_tier: dict[tuple[str, str], dict[str, dict[str, Entry]]] = {
            key: {} for key in self.team_type_used}

    def checkpointed(self, entry: Entry, now: int) -> int | None:
        """Returns when running `entry` last checkpointed in its current run
        (as a live job reports it), None when it has not yet."""
        saved = saved_work(entry, now, self.checkpoint_interval)
        return entry.started + entry.overhead + saved if saved > 0 else None

    def next_checkpoint(self, entry: Entry, now: int) -> int:
        """Returns when running `entry` checkpoints next, after `now`: until
        then `checkpointed` gives the same answer."""
        interval = self.checkpoint_interval
        if interval <= 0:
            return now + 1  # every second's work is saved
        saved = saved_work(entry, now, interval)
        return entry.started + entry.overhead + saved + interval

    def reserved_idle(self) -> int:
        """Returns the reserved GPUs that are free now: room held idle for a
        starving job."""
        gpu = self.free.gpu
        return sum(min(gpu[i], g) for i, g in self.reserved.items())

    def place(self, entry: Entry, nodes: tuple[int, ...]) -> bool:
        """Places the next pods of `entry`; returns whether it now runs.
        Raises ValueError, placing nothing, when a node is of a type the job
        does not accept or of another type than its other pods."""
        first = len(entry.nodes)
        if self.world.gpu_types:
            self._check_type(entry, nodes)
        for k, i in enumerate(nodes):
            self.free.take(i, entry.pods[first + k])
        entry.nodes.extend(nodes)
        if len(entry.nodes) < len(entry.pods):
            held = sum(entry.pods[first:first + len(nodes)])
            self.partial += held
            self.partial_by_team[entry.team] += held
            return False
        held = sum(entry.pods[:first])
        self.partial -= held
        self.partial_by_team[entry.team] -= held
        self.used[entry.team] += entry.gpus
        if entry.gpu_type is not None:
            key = (entry.team, entry.gpu_type)
            self.type_used[entry.gpu_type] += entry.gpus
            self.team_type_used[key] += entry.gpus
            tiers = self.type_tier_gpus[key]
            tiers[entry.tier.name] = tiers.get(entry.tier.name, 0) + entry.gpus
            self.type_by_tier[key].setdefault(entry.tier.name, {})[entry.id] = entry
        tiers = self.tier_gpus[entry.team]
        tiers[entry.tier.name] = tiers.get(entry.tier.name, 0) + entry.gpus
        self.by_tier[entry.team].setdefault(entry.tier.name, {})[entry.id] = entry
        return True

    def release(self, entry: Entry) -> None:
        """Gives back every GPU `entry` holds."""
        for k, i in enumerate(entry.nodes):
            self.free.give(i, entry.pods[k])
        self.used[entry.team] -= entry.gpus
        if entry.gpu_type is not None:
            key = (entry.team, entry.gpu_type)
            self.type_used[entry.gpu_type] -= entry.gpus
            self.team_type_used[key] -= entry.gpus
            self.type_tier_gpus[key][entry.tier.name] -= entry.gpus
            del self.type_by_tier[key][entry.tier.name][entry.id]
        self.tier_gpus[entry.team][entry.tier.name] -= entry.gpus
        del self.by_tier[entry.team][entry.tier.name][entry.id]
        entry.nodes = []
        entry.gpu_type = None

    def _check_type(self, entry: Entry, nodes: tuple[int, ...]) -> None:
        """Sets `entry.gpu_type` from its first pod's node; raises ValueError
        when `nodes` break the rule of the module docstring."""
        world = self.world
        accepted = world.type_of.get(entry.id, world.gpu_types)
        kind = entry.gpu_type or (world.nodes[nodes[0]].gpu_type if nodes else None)
        for i in nodes:
            node = world.nodes[i]
            if node.gpu_type != kind or kind not in accepted:
                raise ValueError(f"job {entry.id} accepts {', '.join(accepted)} GPUs"
                                 + (f" and holds {kind}" if entry.gpu_type else "")
                                 + f"; node {node.name} is of type {node.gpu_type}")
        entry.gpu_type = kind


def replay(
    jobs: tuple[TraceJob, ...],
    world: World,
    policy: Policy,
    *,
    checkpoint_interval: int = 1800,
    observe: Callable[[Cluster, int], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Outcome:
    """Returns the outcome of replaying `jobs` (sorted by submit) under `policy`.

    `observe(cluster, now)` is called after every step (tests assert the
    invariants there); `progress(done, total)` after every step too.
    """
    run = _Run(world, jobs, checkpoint_interval)
    cluster, ledger = run.cluster, run.ledger
    following = 0
    total = len(jobs)
    while following < total or run.ends or cluster.pending:
        now = _next_time(jobs, following, run.ends)
        if now is None:
            ledger.stuck(cluster)  # nothing runs, nothing arrives: no job can start again
            break
        run.now = now
        ledger.advance(cluster, now)
        # 1. Finishes.
        finished = run.finish_due()
        # 2. Arrivals.
        arrived = []
        while following < total and jobs[following].submit == now:
            job = jobs[following]
            following += 1
            entry = Entry(job, world.tier_of[job.id], pods_of(job.gpus), job.submit,
                          job.duration, job.submit)
            cluster.pending[job.id] = entry
            cluster.demand[entry.team] += entry.gpus
            arrived.append(entry)
        # 3. One admission pass.
        news = News(run.freed, tuple(arrived), finished)
        run.freed = False
        policy.admit(cluster, now, news, run)
        if observe is not None:
            observe(cluster, now)
        if progress is not None:
            progress(ledger.done, total)
    return ledger.outcome(policy.name)


class _Run:
    """The engine's side of a replay: the clock, the cluster, the ends of
    running jobs (a heap of `(end, line, id, run)`), and the `Actions`."""

    def __init__(self, world: World, jobs, interval: int) -> None:
        self.cluster = Cluster(world, interval)
        self.ledger = Ledger(world, jobs)
        self.interval = interval
        self.ends: list[tuple[int, int, str, int]] = []
        self.now = 0
        self.freed = False

    def finish_due(self) -> tuple[Entry, ...]:
        """Ends the jobs due now; returns them in the order they ended."""
        cluster, ends = self.cluster, self.ends
        finished = []
        while ends and ends[0][0] == self.now:
            _, _, job_id, run = heapq.heappop(ends)
            entry = cluster.running.get(job_id)
            if entry is None or entry.run != run:
                continue  # preempted since: a stale end
            del cluster.running[job_id]
            cluster.release(entry)
            cluster.demand[entry.team] -= entry.gpus
            self.ledger.finish(entry, self.now)
            self.freed = True
            finished.append(entry)
        return tuple(finished)

    def start(self, entry: Entry, nodes: tuple[int, ...], victims: tuple[str, ...] = ()) -> None:
        cluster = self.cluster
        for victim in victims:
            _preempt(cluster, cluster.running.pop(victim), self.now, self.interval, self.ledger)
            self.freed = True
        if cluster.place(entry, nodes):
            del cluster.pending[entry.id]
            cluster.running[entry.id] = entry
            _start(entry, self.now)
            heapq.heappush(self.ends, (self.now + entry.overhead + entry.remaining,
                                       entry.job.line, entry.id, entry.run))

    def reject(self, entry: Entry) -> None:
        del self.cluster.pending[entry.id]
        self.cluster.demand[entry.team] -= entry.gpus
        self.ledger.reject(entry)

    def reserve(self, gpus: dict[int, int]) -> None:
        self.cluster.reserved = gpus


def _next_time(jobs, following, ends) -> int | None:
    candidates = []
    if following < len(jobs):
        candidates.append(jobs[following].submit)
    if ends:
        candidates.append(ends[0][0])
    return min(candidates) if candidates else None


def _start(entry: Entry, now: int) -> None:
    entry.waited += now - entry.pending_since
    entry.started = now
    entry.run += 1
    if entry.first_start is None:
        entry.first_start = now


def saved_work(entry: Entry, now: int, interval: int) -> int:
    """Returns the seconds of work running `entry` has checkpointed in its
    current run: checkpoints fall every `interval` seconds of the job's
    progress (all work is saved when `interval` is 0); 0 or less when none
    fell yet."""
    useful = max(0, now - entry.started - entry.overhead)
    if interval <= 0:
        return useful
    done = entry.job.duration - entry.remaining
    return (done + useful) // interval * interval - done


def _preempt(cluster: Cluster, entry: Entry, now: int, interval: int, ledger: Ledger) -> None:
    """Stops a running job: it keeps the work up to its last checkpoint (all of
    it when `interval` is 0) and pays a restart overhead when it starts again."""
    cluster.release(entry)
    useful = max(0, now - entry.started - entry.overhead)
    saved = max(0, min(saved_work(entry, now, interval), entry.remaining - 1))
    overhead = restart_overhead(entry.gpus)
    ledger.preempt(entry, (useful - saved + overhead) * entry.gpus)
    entry.remaining -= saved
    entry.overhead = overhead
    entry.preemptions += 1
    entry.run += 1
    entry.started = None
    entry.pending_since = now
    cluster.pending[entry.id] = entry
