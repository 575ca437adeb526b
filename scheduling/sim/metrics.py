"""What a replay measured: a ledger filled during the replay, then the
summary rows of `summary.csv` and `teams.csv`.

Definitions (seconds; fractions in 0..1):
- JCT: finish - submit. Queueing delay: all the time a job spent queued,
  first wait and waits after preemptions alike.
- Makespan: last finish - first submit. Utilisation: GPU-seconds of running
  jobs / (cluster GPUs x makespan); GPUs held by a partly placed job do no work
  and are counted apart (`partial_gang_gpu_hours`).
- Lost GPU-hours: per preemption, (work since the last checkpoint + restart
  overhead) x GPUs.
- Guarantee kept: of the time a team asked for at least its nominal (GPUs of
  its running and queued jobs), the share it ran on at least its nominal.
- Jain's index of slowdown (JCT / duration): over the teams' mean slowdowns;
  in `teams.csv`, over the team's own jobs. `teams.csv` also gives each
  team's mean slowdown (`avg_slowdown`, what the cluster's index is taken
  over) and its offered load (`offered_load`): the GPU-hours its finished
  jobs ran for, over its nominal GPUs x the time jobs arrived (first to last
  submit). Above 1 a team asks for more than its quota holds, and its queue
  grows unless it borrows.
- Reserved idle GPU-hours: GPUs reserved for a starving job (R4) while free,
  integrated over time: room kept from backfill that did no work (cluster
  wide only; `teams.csv` has no such column).
- Big jobs: those of at least `BIG_GANG` GPUs; their p99 and longest
  queueing delays tell whether big gangs are starved.
- Per GPU type (only with types, `types.csv`): GPU-hours delivered (GPUs of
  running jobs of that type, integrated over time) and utilisation (those
  GPU-seconds / (the type's GPUs x makespan)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .trace import TraceJob
from .world import World

SAMPLES = 400
BIG_GANG = 32  # GPUs: four whole nodes or more

COLUMNS = ("policy", "load", "jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct",
           "avg_queue", "median_queue", "p99_queue", "makespan", "utilization",
           "preemptions", "lost_gpu_hours", "partial_gang_gpu_hours", "guarantee_kept",
           "jain_slowdown", "reserved_idle_gpu_hours", "p99_queue_big", "max_queue_big")
# Per team: every column but the reserved room, which belongs to the cluster.
TEAM_COLUMNS = COLUMNS[:2] + ("team",) + tuple(
    c for c in COLUMNS[2:] if c != "reserved_idle_gpu_hours") + ("avg_slowdown", "offered_load")
TYPE_COLUMNS = ("policy", "load", "gpu_type", "gpus", "gpu_hours", "utilization")


@dataclass(frozen=True, slots=True)
class Record:
    team: str
    gpus: int
    duration: int
    submit: int
    end: int
    queue: int
    preemptions: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one replay measured."""

    policy: str
    jobs: int
    records: tuple[Record, ...]
    teams: tuple[str, ...]
    capacity: int
    first_submit: int
    busy: int  # GPU-seconds of running jobs
    partial: int  # GPU-seconds held by partly placed jobs
    lost: int  # GPU-seconds lost to preemptions
    preemptions: int
    rejected: int
    stuck: int  # jobs that could never start (deadlock)
    stuck_at: int | None
    team_busy: dict[str, int]
    team_partial: dict[str, int]
    team_kept: dict[str, int]
    team_asked: dict[str, int]
    team_lost: dict[str, int]
    team_preemptions: dict[str, int]
    team_nominal: dict[str, int]  # GPUs
    last_submit: int
    times: tuple[int, ...]  # sample times, for the plot of use per team
    use: tuple[tuple[int, ...], ...]  # GPUs in use per team at each sample
    reserved_idle: int = 0  # GPU-seconds reserved (R4) while free
    # GPU type -> (its GPUs, GPU-seconds of running jobs), in the cluster's
    # order; empty without types.
    type_busy: tuple[tuple[str, int, int], ...] = ()


class Ledger:
    """Accumulates an outcome while the engine replays."""

    def __init__(self, world: World, jobs: tuple[TraceJob, ...]) -> None:
        self.world = world
        self.teams = tuple(t.name for t in world.teams)
        self.nominal = world.nominal
        self.capacity = world.capacity
        self.jobs = len(jobs)
        self.first = jobs[0].submit if jobs else 0
        self.last_submit = jobs[-1].submit if jobs else 0
        self.last = self.first
        span = self.last_submit - self.first
        self.every = max(1, span // SAMPLES)
        self.next_sample = self.first
        self.times: list[int] = []
        self.use: list[tuple[int, ...]] = []
        self.records: list[Record] = []
        self.busy = self.partial = self.lost = self.preemptions = self.rejected = 0
        self.reserved_idle = 0
        self.stuck_jobs = 0
        self.stuck_at: int | None = None
        zero = dict.fromkeys(self.teams, 0)
        self.team_busy, self.team_kept, self.team_asked = dict(zero), dict(zero), dict(zero)
        self.team_partial = dict(zero)
        self.team_lost, self.team_preemptions = dict(zero), dict(zero)
        self.type_busy = dict.fromkeys(world.gpu_types, 0)

    @property
    def done(self) -> int:
        return len(self.records) + self.rejected

    def advance(self, cluster, now: int) -> None:
        """Integrates the state of `cluster`, unchanged since the last call, up to `now`."""
        dt = now - self.last
        if dt <= 0:
            return
        while self.next_sample < now:
            self.times.append(self.next_sample)
            self.use.append(tuple(cluster.used[t] for t in self.teams))
            self.next_sample += self.every
        self.last = now
        used = cluster.used
        self.busy += (self.capacity - cluster.free.total - cluster.partial) * dt
        if cluster.reserved:
            self.reserved_idle += cluster.reserved_idle() * dt
        for kind, gpus in cluster.type_used.items():
            self.type_busy[kind] += gpus * dt
        if cluster.partial:
            self.partial += cluster.partial * dt
            for team, held in cluster.partial_by_team.items():
                self.team_partial[team] += held * dt
        for team in self.teams:
            u = used[team]
            self.team_busy[team] += u * dt
            nominal = self.nominal[team]
            if cluster.demand[team] >= nominal:
                self.team_asked[team] += dt
                if u >= nominal:
                    self.team_kept[team] += dt

    def finish(self, entry, now: int) -> None:
        self.records.append(Record(entry.team, entry.gpus, entry.job.duration, entry.queued,
                                   now, entry.waited, entry.preemptions))

    def preempt(self, entry, lost_gpu_seconds: int) -> None:
        self.preemptions += 1
        self.lost += lost_gpu_seconds
        self.team_preemptions[entry.team] += 1
        self.team_lost[entry.team] += lost_gpu_seconds

    def reject(self, entry) -> None:
        self.rejected += 1

    def stuck(self, cluster) -> None:
        """Records a deadlock: queued jobs that no future event can start."""
        self.stuck_jobs = len(cluster.pending)
        self.stuck_at = self.last

    def outcome(self, policy: str) -> Outcome:
        return Outcome(
            policy, self.jobs, tuple(self.records), self.teams, self.capacity, self.first,
            self.busy, self.partial, self.lost, self.preemptions, self.rejected,
            self.stuck_jobs, self.stuck_at, self.team_busy, self.team_partial,
            self.team_kept, self.team_asked, self.team_lost, self.team_preemptions,
            dict(self.nominal), self.last_submit, tuple(self.times), tuple(self.use),
            self.reserved_idle,
            tuple((kind, sum(n.gpu for n in self.world.nodes if n.gpu_type == kind), busy)
                  for kind, busy in self.type_busy.items()),
        )


def percentile(sorted_values: list[float], q: float) -> float:
    """Returns the nearest-rank `q` quantile (0 < q <= 1) of sorted values, 0 when empty."""
    if not sorted_values:
        return 0.0
    return float(sorted_values[max(0, min(len(sorted_values) - 1,
                                          math.ceil(q * len(sorted_values)) - 1))])


def jain(values: list[float]) -> float:
    """Returns Jain's fairness index of `values` (1 = all equal), 1 when empty."""
    if not values:
        return 1.0
    square = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * square) if square else 1.0


def summarize(outcome: Outcome, load: float) -> dict[str, object]:
    """Returns the `summary.csv` row of one replay."""
    makespan = _makespan(outcome)
    slowdowns: dict[str, list[float]] = {}
    for r in outcome.records:
        slowdowns.setdefault(r.team, []).append(_slowdown(r))
    asked = sum(outcome.team_asked.values())
    row = _times(outcome.policy, load, outcome.records)
    row.update(
        makespan=makespan,
        utilization=outcome.busy / (outcome.capacity * makespan) if makespan else 0.0,
        preemptions=outcome.preemptions,
        lost_gpu_hours=outcome.lost / 3600,
        partial_gang_gpu_hours=outcome.partial / 3600,
        guarantee_kept=sum(outcome.team_kept.values()) / asked if asked else 1.0,
        jain_slowdown=jain([sum(v) / len(v) for v in slowdowns.values()]),
        reserved_idle_gpu_hours=outcome.reserved_idle / 3600,
    )
    return row


def summarize_teams(outcome: Outcome, load: float) -> list[dict[str, object]]:
    """Returns the `teams.csv` rows of one replay, one per team; utilisation
    is the team's share of the cluster's GPU-seconds over the makespan."""
    makespan = _makespan(outcome)
    arriving = max(1, outcome.last_submit - outcome.first_submit)
    rows = []
    for team in outcome.teams:
        records = [r for r in outcome.records if r.team == team]
        asked = outcome.team_asked[team]
        slowdowns = [_slowdown(r) for r in records]
        nominal = outcome.team_nominal[team]
        row = _times(outcome.policy, load, records)
        row.update(
            makespan=max((r.end for r in records), default=outcome.first_submit)
            - min((r.submit for r in records), default=outcome.first_submit),
            utilization=outcome.team_busy[team] / (outcome.capacity * makespan) if makespan else 0.0,
            preemptions=outcome.team_preemptions[team],
            lost_gpu_hours=outcome.team_lost[team] / 3600,
            partial_gang_gpu_hours=outcome.team_partial[team] / 3600,
            guarantee_kept=outcome.team_kept[team] / asked if asked else 1.0,
            jain_slowdown=jain(slowdowns),
            avg_slowdown=sum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
            offered_load=(sum(r.gpus * r.duration for r in records) / (nominal * arriving)
                          if nominal else 0.0),
        )
        rows.append({"policy": outcome.policy, "load": load, "team": team, **row})
    return rows


def summarize_types(outcome: Outcome, load: float) -> list[dict[str, object]]:
    """Returns the `types.csv` rows of one replay, one per GPU type in the
    cluster's order; none without types."""
    makespan = _makespan(outcome)
    return [{"policy": outcome.policy, "load": load, "gpu_type": kind, "gpus": gpus,
             "gpu_hours": busy / 3600,
             "utilization": busy / (gpus * makespan) if gpus and makespan else 0.0}
            for kind, gpus, busy in outcome.type_busy]


def _slowdown(record: Record) -> float:
    """Returns a finished job's slowdown: its JCT over its duration."""
    return (record.end - record.submit) / max(record.duration, 1)


def _makespan(outcome: Outcome) -> int:
    return max((r.end for r in outcome.records), default=outcome.first_submit) - outcome.first_submit


def _times(policy: str, load: float, records) -> dict[str, object]:
    jct = sorted(r.end - r.submit for r in records)
    queue = sorted(r.queue for r in records)
    big = sorted(r.queue for r in records if r.gpus >= BIG_GANG)
    count = len(records)
    return dict(
        policy=policy, load=load, jobs=count,
        avg_jct=sum(jct) / count if count else 0.0,
        median_jct=percentile(jct, 0.5), p95_jct=percentile(jct, 0.95),
        p99_jct=percentile(jct, 0.99),
        avg_queue=sum(queue) / count if count else 0.0,
        median_queue=percentile(queue, 0.5), p99_queue=percentile(queue, 0.99),
        p99_queue_big=percentile(big, 0.99), max_queue_big=float(big[-1]) if big else 0.0,
    )
