"""The running jobs a reserving pass lists, kept from pass to pass in the
policy's `Standing` (see reduced.py's docstring for why such a pass lists
every one of them).

No pass walks the running jobs to list them: the standing changes only as
jobs start, end or are preempted, and, read at a reserving pass, as their
description changes: a job's last checkpoint (R8) once its next one is
due, and its estimate (R14) once the estimate of its team and GPUs changed.
Each running job is then described as `Planner.running_jobs` describes it
at that pass, so the snapshot's running jobs are those of the full
snapshot, and `plan` reads them through the standing instead of going over
them (the policy's standing.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.policy import RunningJob, Standing

from ..engine import Cluster, Entry
from ..runtimes import Runtimes


@dataclass(slots=True)
class Running:
    """Every running job as the snapshot lists it, in `standing`.

    `describe(cluster, entries, now)` returns entries as the snapshot lists
    them at `now`, and leaves in each entry's cache, under "checkpoint",
    when its last checkpoint changes next (when `checkpoints` is set)."""

    standing: Standing
    describe: Callable[[Cluster, list[Entry], int], list[RunningJob]]
    runtimes: Runtimes | None = None
    checkpoints: bool = False
    # (time, job id): a heap of when each job's last checkpoint changes next
    due: list[tuple[int, str]] = field(default_factory=list)
    upcoming: dict[str, int] = field(default_factory=dict)  # job id -> its live time in `due`
    # runtime key (team, GPUs) -> running entries by id: a new estimate for a
    # key changes every one of them
    by_key: dict[tuple[str, int], dict[str, Entry]] = field(default_factory=dict)
    stale: set[tuple[str, int]] = field(default_factory=set)  # keys whose estimate changed

    def start(self, cluster: Cluster, entry: Entry, now: int) -> None:
        """Adds an entry that started running at `now`."""
        self.standing.add(self.describe(cluster, [entry], now)[0])
        if self.runtimes is not None:
            self.by_key.setdefault(self.runtimes.key(entry), {})[entry.id] = entry
        self._schedule(entry)

    def stop(self, entry: Entry) -> None:
        """Takes out an entry that ended or was preempted."""
        self.standing.remove(entry.id)
        if self.runtimes is not None:
            del self.by_key[self.runtimes.key(entry)][entry.id]
        self.upcoming.pop(entry.id, None)

    def relearn(self, key: tuple[str, int]) -> None:
        """Notes that the estimate of `key` (team, GPUs) changed: its running
        jobs are described again when the standing is next read."""
        self.stale.add(key)

    def update(self, cluster: Cluster, now: int) -> None:
        """Describes again, as of `now`, every running job whose last
        checkpoint or estimate changed since the standing was last read."""
        due, upcoming = self.due, self.upcoming
        while due and due[0][0] <= now:
            at, job_id = heapq.heappop(due)
            if upcoming.get(job_id) == at:  # else stopped, or due at another time
                del upcoming[job_id]
                self._refresh(cluster, cluster.running[job_id], now)
        for key in self.stale:
            self._reestimate(key)
        self.stale.clear()

    def _reestimate(self, key: tuple[str, int]) -> None:
        """Describes the running jobs of `key` (team, GPUs) with its estimate
        now, their last checkpoints being up to date already: as `describe`
        would, in fewer steps, since a new estimate changes every running job
        of its key (on the large synthetic cluster, some 120 per pass)."""
        assert self.runtimes is not None  # only a planner learning runtimes relearns
        estimate = self.runtimes.learned.get(key)
        standing, kept = self.standing, self.standing.jobs
        for entry in self.by_key.get(key, {}).values():
            old = kept[entry.id]
            if old.estimate == estimate:
                continue
            job = RunningJob(old.id, old.team, old.tier, old.started, old.replicas, old.nodes,
                             old.max_runtime, old.queued, estimate, old.checkpointed, old.gpu_type)
            standing.reestimate(job)
            cached = entry.cache["running"]  # (job, run, valid until), as `describe` leaves it
            entry.cache["running"] = (job, cached[1], cached[2])

    def _refresh(self, cluster: Cluster, entry: Entry, now: int) -> None:
        job = self.describe(cluster, [entry], now)[0]
        if job is not self.standing.jobs[entry.id]:
            self.standing.replace(job)
        self._schedule(entry)

    def _schedule(self, entry: Entry) -> None:
        """Notes when the entry's last checkpoint changes next."""
        if not self.checkpoints:
            return
        at = entry.cache["checkpoint"][1]
        if self.upcoming.get(entry.id) != at:
            self.upcoming[entry.id] = at
            heapq.heappush(self.due, (at, entry.id))
