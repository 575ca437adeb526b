"""The planner's queue: the pending jobs as its snapshots list them, kept
up to date as jobs arrive, start, are rejected and are preempted, with
counts of what the queue asks for so a pass never walks it. The jobs are
kept in R3's order (the policy's `R3Queue`), which `plan` then takes
instead of sorting the whole queue in every pass."""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field, replace

from scheduling.policy import PendingJob, Tier
from scheduling.policy.order import R3Queue

from ..engine import Entry
from ..runtimes import Runtimes
from ..world import replicas_of


@dataclass(slots=True)
class Queue:
    """The queue as the snapshot lists it, kept up to date as jobs arrive,
    start, are rejected and are preempted, with counts that tell what it
    asks for without a pass over it."""

    tiers: dict[str, Tier]
    # The jobs in R3 order, made for the tiers of the snapshots (those of
    # folded usage too, which no queued job has).
    jobs: R3Queue
    runtimes: Runtimes | None = None
    # job id -> the GPU types it accepts (the world's; empty without types)
    type_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (team, GPUs) -> the queued entries R14 learns one estimate for, by id
    by_kind: dict[tuple[str, int], dict[str, Entry]] = field(default_factory=dict)
    times: list[int] = field(default_factory=list)  # queue times, sorted
    everything: Tally = field(default_factory=lambda: Tally())  # what all jobs ask for
    # GPU type -> what the jobs accepting it ask for (a job accepting several
    # types counts in each); empty without types.
    by_type: dict[str, Tally] = field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        job = self._pending(entry)
        self.jobs.add(job)
        self.by_kind.setdefault((entry.team, entry.gpus), {})[job.id] = entry
        insort(self.times, entry.queued)
        self._count(job, entry, 1)

    def remove(self, entry: Entry) -> None:
        del self.by_kind[(entry.team, entry.gpus)][entry.id]
        del self.times[bisect_left(self.times, entry.queued)]
        self._count(self.jobs.remove(entry.id), entry, -1)

    def starving(self, before: int) -> int:
        """Returns how many queued jobs queued before `before`."""
        return bisect_left(self.times, before)

    def relearn(self, key: tuple[str, int]) -> None:
        """Lists the queued jobs of `key` (team, GPUs) with their new estimate."""
        for entry in self.by_kind.get(key, {}).values():
            self.jobs.replace(self._pending(entry))

    def _pending(self, entry: Entry) -> PendingJob:
        runtimes = self.runtimes
        estimate = None if runtimes is None else runtimes.estimate(entry)
        job = entry.cache.get("pending")
        if job is None:
            job = entry.cache["pending"] = PendingJob(
                entry.id, entry.team, entry.tier.name, entry.queued, replicas_of(entry.gpus),
                max_runtime=None if runtimes is None else runtimes.max_runtime(entry),
                estimate=estimate, gpu_type=self.type_of.get(entry.id, ()))
        elif job.estimate != estimate:
            job = entry.cache["pending"] = replace(job, estimate=estimate)
        return job

    def _count(self, job: PendingJob, entry: Entry, sign: int) -> None:
        value = self.tiers[job.tier].value
        self.everything.count(job, entry, value, sign)
        for kind in self.type_of.get(entry.id, ()):
            tally = self.by_type.get(kind)
            if tally is None:
                tally = self.by_type[kind] = Tally()
            tally.count(job, entry, value, sign)

    def asked(self, gpu_type: str | None = None) -> Asked:
        """Returns what the queue asks for: all of it (`gpu_type` None), or
        the jobs that accept `gpu_type`."""
        tally = self.everything if gpu_type is None else self.by_type.get(gpu_type)
        return Asked() if tally is None else tally.asked()


@dataclass(slots=True)
class Tally:
    """Counts of what some queued jobs ask for, kept as jobs come and go."""

    queued: dict[str, int] = field(default_factory=dict)  # team -> GPUs
    values: dict[str, dict[int, int]] = field(default_factory=dict)  # team -> tier value -> jobs
    sizes: dict[str, dict[int, int]] = field(default_factory=dict)  # team -> GPUs -> jobs
    widths: dict[int, int] = field(default_factory=dict)  # replicas -> jobs
    pods: int = 0
    mixed: int = 0  # jobs of several replica groups

    def count(self, job: PendingJob, entry: Entry, value: int, sign: int) -> None:
        team, gpus, width = job.team, entry.gpus, len(entry.pods)
        self.queued[team] = self.queued.get(team, 0) + sign * gpus
        _tally(self.values.setdefault(team, {}), value, sign)
        _tally(self.sizes.setdefault(team, {}), gpus, sign)
        _tally(self.widths, width, sign)
        self.pods += sign * width
        self.mixed += sign * (len(job.replicas) > 1)

    def asked(self) -> Asked:
        return Asked(
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
class Asked:
    """What the queue asks for, per team and in all."""

    queued: dict[str, int] = field(default_factory=dict)  # GPUs
    top: dict[str, int] = field(default_factory=dict)  # highest tier value
    least: dict[str, int] = field(default_factory=dict)  # smallest job's GPUs
    pods: int = 0
    widest: int = 0  # most replicas of one job
    mixed: bool = False  # some job has several replica groups
