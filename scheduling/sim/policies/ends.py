"""The running jobs a reserving pass does not list, grouped by expected end
(R14), kept from pass to pass (see reduced.py's docstring for why a
reserving pass sees them so).

No pass walks the running jobs to group them: the groups change only as
jobs start, end, are preempted, get a new estimate or come on or off the
pass's list of victims, and a pass reads them as they stand. A group is
kept by its jobs' true expected end; the groups whose end is past are
merged into one when read, since R14 expects all of them
`reservation_slack` from now.
"""

from __future__ import annotations

import heapq
from collections.abc import Set
from dataclasses import dataclass, field
from functools import cache

from scheduling.policy import ReplicaGroup, RunningJob, Settings
from scheduling.policy.runtime import expected_runtime

from ..engine import Entry
from ..runtimes import Runtimes
from ..world import World


@dataclass(slots=True)
class Ends:
    """Running jobs by expected end, each end's GPUs per node, without the
    jobs the last pass listed as victims."""

    world: World
    settings: Settings
    runtimes: Runtimes | None = None
    # job id -> (expected end, ((node, GPUs), ...)) of every running job
    held: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    # runtime key (team, GPUs) -> running entries by id: a new estimate for
    # a key moves every one of them to another end
    by_key: dict[tuple[str, int], dict[str, Entry]] = field(default_factory=dict)
    listed: set[str] = field(default_factory=set)  # running jobs left out of the groups
    stale: set[tuple[str, int]] = field(default_factory=set)  # keys whose estimate changed
    # expected end -> node -> GPUs of the jobs not listed that end then,
    # for ends after `horizon`; `past`, the same for the ends at or before it
    groups: dict[int, dict[int, int]] = field(default_factory=dict)
    past: dict[int, int] = field(default_factory=dict)
    horizon: int = -1
    soon: list[int] = field(default_factory=list)  # a heap of the ends in `groups`
    # expected end -> the outside job of a group unchanged since it was made
    jobs: dict[int, RunningJob] = field(default_factory=dict)
    # the outside job of the past ends, for the last pass's time, until `past` changes
    last: RunningJob | None = None

    def start(self, entry: Entry) -> None:
        """Adds an entry that started running."""
        end = entry.started + self._runtime(entry)
        pods = tuple(zip(entry.nodes, entry.pods))
        self.held[entry.id] = (end, pods)
        if self.runtimes is not None:
            self.by_key.setdefault(self.runtimes.key(entry), {})[entry.id] = entry
        self._add(end, pods, 1)

    def stop(self, entry: Entry) -> None:
        """Takes out an entry that ended or was preempted (its nodes may be gone)."""
        end, pods = self.held.pop(entry.id)
        if self.runtimes is not None:
            del self.by_key[self.runtimes.key(entry)][entry.id]
        if entry.id in self.listed:
            self.listed.discard(entry.id)
        else:
            self._add(end, pods, -1)

    def relearn(self, key: tuple[str, int]) -> None:
        """Notes that the estimate of `key` (team, GPUs) changed: its running
        jobs move to the end it gives when the groups are next read."""
        self.stale.add(key)

    def _move(self) -> None:
        """Moves the running jobs of every key whose estimate changed since
        the groups were last read to the end it gives now. An estimate
        changes at most successes, often several times between two
        reserving passes, and each move touches every running job of the key."""
        held, listed = self.held, self.listed
        for key in self.stale:
            for job_id, entry in self.by_key.get(key, {}).items():
                old, pods = held[job_id]
                end = entry.started + self._runtime(entry)
                if end != old:
                    held[job_id] = (end, pods)
                    if job_id not in listed:
                        self._add(old, pods, -1)
                        self._add(end, pods, 1)
        self.stale.clear()

    def outside(self, now: int, listed: Set[str]) -> list[RunningJob]:
        """Returns the running jobs not `listed` as outside usage (R12): one
        job per expected end holding, on each node, the GPUs of the jobs
        that end then; every end at or before `now` is one job, expected
        `reservation_slack` from now as each of its jobs is. Room frees on
        the same nodes at the same times as with one outside job per
        running job, and nothing else reads outside usage: it is never a
        victim and counts against no quota."""
        self._move()
        held = self.held
        for job_id in self.listed - listed:
            end, pods = held[job_id]
            self._add(end, pods, 1)
        for job_id in listed - self.listed:
            end, pods = held[job_id]
            self._add(end, pods, -1)
        self.listed = set(listed)
        while self.soon and self.soon[0] <= now:
            end = heapq.heappop(self.soon)
            group = self.groups.pop(end, None)
            if group is not None:
                self.jobs.pop(end, None)
                for i, gpus in group.items():
                    self.past[i] = self.past.get(i, 0) + gpus
                self.last = None
        self.horizon = max(self.horizon, now)
        found = []
        for end, group in self.groups.items():
            job = self.jobs.get(end)
            if job is None:
                job = self.jobs[end] = self._job(end, group)
            found.append(job)
        if self.past:
            last = self.last
            if last is None or last.started != now - 1:
                # Keyed by now, as every past end is: the policy's
                # expected_end gives `reservation_slack` from now.
                last = self.last = (self._job(now, self.past) if last is None else RunningJob(
                    f"~end-{now}", None, None, now - 1, last.replicas, last.nodes, estimate=1))
            found.append(last)
        return found

    def _runtime(self, entry: Entry) -> int:
        runtimes = self.runtimes
        if runtimes is None:
            return expected_runtime(None, None, self.settings)
        return expected_runtime(runtimes.max_runtime(entry),
                                runtimes.learned.get(runtimes.key(entry)), self.settings)

    def _add(self, end: int, pods: tuple[tuple[int, int], ...], sign: int) -> None:
        """Adds (`sign` 1) or takes away (-1) a job's GPUs in its end's group."""
        if end <= self.horizon:
            group = self.past
            self.last = None
        else:
            group = self.groups.get(end)
            if group is None:
                group = self.groups[end] = {}
                heapq.heappush(self.soon, end)
            self.jobs.pop(end, None)
        for i, gpus in pods:
            left = group.get(i, 0) + sign * gpus
            if left:
                group[i] = left
            else:
                del group[i]
        if not group and end > self.horizon:
            del self.groups[end]

    def _job(self, end: int, on_node: dict[int, int]) -> RunningJob:
        """Returns the outside job of the GPUs `on_node` expected to end at `end`."""
        names = self.world.nodes
        # Started a second before `end` and expected to run one second: the
        # policy's expected_end gives `end`.
        return RunningJob(f"~end-{end}", None, None, end - 1, tuple(map(_replica, on_node.values())),
                          tuple(names[i].name for i in on_node), estimate=1)


@cache
def _replica(gpus: int) -> ReplicaGroup:
    """Returns one replica of `gpus` GPUs, made once per size: it is frozen,
    so every snapshot may share it."""
    return ReplicaGroup(1, gpu=gpus)
