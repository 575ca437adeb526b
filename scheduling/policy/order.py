"""The order pending jobs are considered in: R3, with R9 inside a tier value.

R3: tier value (high first), queue time (old first), id (ascending).
R9: within one tier value, when the next job would borrow and so competes for
borrowable capacity, the first job of another team that would also borrow goes
first if its team has a lower weighted dominant share (ties keep R3's order).
Jobs that do not borrow keep R3's order.

A caller that plans again and again over a queue that changes little from one
plan to the next (the trace replay: a pass at every second something happens,
over thousands of queued jobs) keeps its pending jobs in an `R3Queue` as they
arrive and leave, and hands `plan` the snapshot whose `pending` is the queue's
`pending` together with the queue: the cycle then takes that order as R3's
instead of sorting the whole queue again. The plan is the same as without it:
the cycle reads the queue only for the snapshot whose `pending` is the very
tuple `pending` returned, on the tiers it was made for.
The queue also counts its jobs per shape (team, tier, demand, GPU types),
which is all R10's rejection reads: a cycle given the queue judges each shape
once instead of each job, and goes over the jobs only when one is rejected.
`tests/policy/test_policy_r3_queue.py` compares plans with and without it.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from .model import PendingJob, Tier
from .quota import Quota

R3Key = tuple[int, int, tuple[bool, int, str]]


def r3_key(job: PendingJob, tiers: dict[str, Tier]) -> R3Key:
    """Returns the R3 sort key of a pending job."""
    return (-tiers[job.tier].value, job.queued, job.order)


def r3_sorted(jobs: list[PendingJob], tiers: dict[str, Tier]) -> list[PendingJob]:
    """Returns `jobs` in R3 order (the keys of `r3_key`, built inline: the
    cycle sorts its whole queue)."""
    value = {name: -tier.value for name, tier in tiers.items()}
    keyed = [(value[job.tier], job.queued, job.order, job) for job in jobs]
    keyed.sort()  # ids are unique: the job itself is never compared
    return [k[3] for k in keyed]


class R3Queue:
    """Pending jobs kept in R3 order as they come and go (see the module
    docstring): changed only through `add`, `remove` and `replace`."""

    def __init__(self, tiers: Iterable[Tier]) -> None:
        self.tiers = {t.name: t for t in tiers}
        self.keys: list[R3Key] = []  # R3 keys, in order
        self.jobs: list[PendingJob] = []  # the job of each key
        self.marks: dict[str, R3Key] = {}  # id -> its R3 key
        # shape (team, tier, demand, GPU types) -> [how many jobs have it, one
        # job of it, perhaps gone since: R10 reads only its shape]
        self.shapes: dict[tuple, list] = {}
        self._pending: tuple[PendingJob, ...] | None = ()

    @property
    def pending(self) -> tuple[PendingJob, ...]:
        """Returns the jobs in R3 order: the same tuple until one changes."""
        if self._pending is None:
            self._pending = tuple(self.jobs)
        return self._pending

    def orders(self, pending: tuple[PendingJob, ...], tiers: dict[str, Tier]) -> bool:
        """Returns whether `pending` is the tuple `pending` returned while the
        jobs stayed as they are, and `tiers` those the queue was made for:
        whether `pending` is in R3 order under `tiers`."""
        return pending is self._pending and tiers == self.tiers

    def __len__(self) -> int:
        return len(self.jobs)

    def __contains__(self, job_id: str) -> bool:
        return job_id in self.marks

    def add(self, job: PendingJob) -> None:
        """Adds a job that queued (again); raises ValueError when its id is held already."""
        if job.id in self.marks:
            raise ValueError(f"job {job.id} is queued already")
        key = self.marks[job.id] = r3_key(job, self.tiers)
        k = bisect_left(self.keys, key)
        self.keys.insert(k, key)
        self.jobs.insert(k, job)
        self._count(job, 1)
        self._pending = None

    def remove(self, job_id: str) -> PendingJob:
        """Takes out a job that started or was rejected; returns it."""
        k = bisect_left(self.keys, self.marks.pop(job_id))
        del self.keys[k]
        self._pending = None
        job = self.jobs.pop(k)
        self._count(job, -1)
        return job

    def replace(self, job: PendingJob) -> None:
        """Puts `job` in place of the queued job of the same id (a new estimate)."""
        key = r3_key(job, self.tiers)
        if key != self.marks[job.id]:  # another tier or queue time: another place
            self.remove(job.id)
            self.add(job)
            return
        k = bisect_left(self.keys, key)
        if self.jobs[k] is not job:
            self._count(self.jobs[k], -1)
            self._count(job, 1)
            self.jobs[k] = job
            self._pending = None

    def _count(self, job: PendingJob, step: int) -> None:
        shape = (job.team, job.tier, job.demand, job.gpu_type)
        counted = self.shapes.get(shape)
        if counted is None:
            self.shapes[shape] = [step, job]
        elif counted[0] + step:
            counted[0] += step
        else:
            del self.shapes[shape]


def admission_order(
    jobs: list[PendingJob],
    tiers: dict[str, Tier],
    quota: Quota,
    skip_team: Callable[[str], bool],
    quota_of: Callable[[PendingJob], Quota] | None = None,
) -> Iterator[PendingJob]:
    """Yields `jobs` (already in R3 order) in the order the cycle admits them.

    Quota is read at each step, so admissions made between steps count (R9
    compares shares as they are at that moment). `skip_team` tells which
    teams are held by the starvation guard: their jobs never jump ahead.
    On a cluster with GPU types, `quota_of` gives the quota of a job's first
    type: only jobs whose first types agree compete for borrowable GPUs.
    """
    start = 0
    while start < len(jobs):
        value = tiers[jobs[start].tier].value
        end = start
        while end < len(jobs) and tiers[jobs[end].tier].value == value:
            end += 1
        yield from _one_tier(jobs[start:end], tiers, quota, skip_team, quota_of)
        start = end


def first_quota(state, kinds_of: dict[str, tuple]) -> Callable[[PendingJob], Quota]:
    """Returns, for R9 on a cluster with GPU types, the function giving the
    quota of a pending job's first GPU type (of no type: the first quota)."""
    def quota_of(job: PendingJob) -> Quota:
        kinds = kinds_of.get(job.id)
        kind = kinds[0] if kinds else None
        return state.quotas[0 if kind is None else kind]
    return quota_of


def _one_tier(jobs: list[PendingJob], tiers: dict[str, Tier], quota: Quota,
              skip_team: Callable[[str], bool],
              quota_of: Callable[[PendingJob], Quota] | None = None) -> Iterator[PendingJob]:
    """Yields one tier value's jobs (R3 order) in R9's order: when the next
    job would borrow and R2 admits it, the head (first job left) of another
    team that would borrow too goes first if that team's (weighted dominant
    share, head's index) is lower."""
    done = [False] * len(jobs)
    by_team: dict[str, deque[int]] = {}
    for k, job in enumerate(jobs):
        heads = by_team.get(job.team)
        if heads is None:
            heads = by_team[job.team] = deque()
        heads.append(k)
    rival: _Ranks | _Scan
    if quota_of is None:
        rival = _Ranks(jobs, done, by_team, quota, skip_team)
    else:
        rival = _Scan(jobs, done, by_team, skip_team, quota_of)
    rivals = len(by_team) > 1  # one team alone has no rival
    k = 0
    while k < len(jobs):
        if done[k]:
            k += 1
            continue
        job = jobs[k]
        pick = k
        need = job.demand.total
        if quota_of is not None:
            quota = quota_of(job)
        if (
            rivals
            and not skip_team(job.team)
            and quota.borrows(job.team, need)
            and quota.refuse(job.team, need, not tiers[job.tier].preemptible) is None
        ):
            pick = rival.first(job, k, quota)
        done[pick] = True
        rival.admitted(jobs[pick].team)
        yield jobs[pick]


class _Scan:
    """R9's choice by looking at every team's head at every step; with GPU
    types, only heads whose first type is the job's compete."""

    def __init__(self, jobs: list[PendingJob], done: list[bool], by_team: dict[str, deque[int]],
                 skip_team: Callable[[str], bool],
                 quota_of: Callable[[PendingJob], Quota]) -> None:
        self.jobs, self.done, self.by_team = jobs, done, by_team
        self.skip_team, self.quota_of = skip_team, quota_of

    def first(self, job: PendingJob, k: int, quota: Quota) -> int:
        """Returns the index of the job that goes before job `k`, or `k`."""
        jobs, done = self.jobs, self.done
        best = (quota.dominant_share(job.team), k)
        for team, heads in self.by_team.items():
            while heads and done[heads[0]]:
                heads.popleft()
            if not heads or team == job.team or self.skip_team(team):
                continue
            head = heads[0]
            other = jobs[head]
            if self.quota_of is not None and self.quota_of(other) is not quota:
                continue  # borrows another GPU type: no competition
            if not quota.borrows(team, other.demand.total):
                continue
            share = (quota.dominant_share(team), head)
            if share < best:
                best = share
        return best[1]

    def admitted(self, team: str) -> None:
        """Notes that a job of `team` was yielded (its head moves on)."""


class _Ranks:
    """R9's choice with one quota for every job (no GPU types), the same as
    `_Scan`'s without looking at every team at every step.

    A team competes with its head while that job would borrow, ranked by
    (weighted dominant share, head's index). Both change only when the
    team's usage changes (`Quota.touched`) or its head is admitted, so each
    team's rank is kept in a heap and worked out again only then; a rank
    gone stale is dropped when it surfaces. A team held by the starvation
    guard stays held for the rest of the cycle, so it is dropped for good."""

    def __init__(self, jobs: list[PendingJob], done: list[bool], by_team: dict[str, deque[int]],
                 quota: Quota, skip_team: Callable[[str], bool]) -> None:
        self.jobs, self.done, self.by_team = jobs, done, by_team
        self.quota, self.skip_team = quota, skip_team
        # (share, head, number, team), some stale: `number` counts the ranks
        # worked out, so a stale rank is told from an equal live one
        self.ranks: list[tuple[float, int, int, str]] = []
        self.current: dict[str, int] = {}  # team -> its live rank's number
        self.count = 0
        self.stale = set(by_team)  # teams whose rank must be worked out again
        quota.touched.clear()

    def first(self, job: PendingJob, k: int, quota: Quota) -> int:
        """Returns the index of the job that goes before job `k`, or `k`."""
        self._rerank()
        ranks, current = self.ranks, self.current
        while ranks:
            share, head, number, team = ranks[0]
            live = current.get(team) == number
            if not live or self.skip_team(team):
                heapq.heappop(ranks)  # stale, or held for good
                if live:
                    del current[team]
                continue
            # The least rank: another team's head goes first if it is below
            # this job's team's, whose rank is this job's own.
            if team != job.team and (share, head) < (quota.dominant_share(job.team), k):
                return head
            break
        return k

    def admitted(self, team: str) -> None:
        """Notes that a job of `team` was yielded (its head moves on)."""
        self.stale.add(team)

    def _rerank(self) -> None:
        quota, stale, by_team, done = self.quota, self.stale, self.by_team, self.done
        stale.update(t for t in quota.touched if t in by_team)
        quota.touched.clear()
        for team in stale:
            heads = by_team[team]
            while heads and done[heads[0]]:
                heads.popleft()
            if heads and not self.skip_team(team) and quota.borrows(
                    team, self.jobs[heads[0]].demand.total):
                self.count += 1
                heapq.heappush(self.ranks, (quota.dominant_share(team), heads[0], self.count, team))
                self.current[team] = self.count
            else:
                self.current.pop(team, None)
        stale.clear()


def rewound(passed: dict, lines, probe) -> list[tuple[str, int]]:
    """After a job with key `probe` (R3 order) started, cuts each team's range of jobs passed over,
    `passed[team] = (c0, c1)` indices into `lines[team]` (sorted in R3 order), back to the jobs
    before that one; returns (team, k) for each team that had passed over a later job, k the
    index of the first: R2 may refuse that job now, which holds the team, so the walk goes back
    to it. Used by the typed estimate replay (typed_queue.py); lines.py asks R2 again instead
    (`Lines._recheck`).

    A range wholly before `probe` is dropped: the walks go in R3 order, so every later start
    comes after `probe`, and after that range too."""
    back = []
    for team, (c0, c1) in list(passed.items()):
        k = bisect_left(lines[team], probe, c0, c1)
        if k == c1:
            del passed[team]
            continue
        if k > c0:
            passed[team] = (c0, k)
        else:
            del passed[team]
        back.append((team, k))
    return back
