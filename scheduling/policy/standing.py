"""The running jobs of successive snapshots, indexed once and kept up to date.

A caller that plans again and again over a cluster that changes little from
one plan to the next (the trace replay: a pass at every second something
happens, each over thousands of running jobs) keeps its running jobs in a
`Standing`, adding and removing them as they start and stop, and hands
`plan` the snapshot whose `running` is `standing.running` together with the
standing. The cycle's state (state.py) then reads what it would otherwise
work out again from every running job in every cycle:

- the room they take on each node, as GPU, CPU and memory columns in the
  order of the nodes the standing was made for, and the room they leave,
  kept as they come and go once a cycle asked for it (`room_left`);
- their usage per team, non-preemptible tier or not and GPU type;
- each team's jobs in R8's victim order (`r8_key`), of each GPU type and
  of all, whose first ones are those of the lowest tiers (R5's candidates);
- their expected ends (R14) in order, each kept as start plus expected
  runtime, so that a cycle reads the ends at or before its `now` as R14
  expects them, `reservation_slack` from now;
- what each job holds in all and on each node (`held`), worked out the
  first time a cycle reads it;
- what a victim search's upper bound counted of a team's jobs (preemption.py,
  `Reach`), which depends on those jobs alone, for the cycles after it while
  the team's jobs stay the same.

The plan is the same as without it: `plan` reads a standing only for the
snapshot whose `running` is the very tuple `running` returned (which the
standing builds from the jobs it holds), on the nodes, tiers and settings it
was made for. It never changes the jobs; it leaves there what it worked out
from them alone (the room they leave, what a job holds, a team's reach), which the standing
drops as the jobs it was worked out from change. The caller must not change
the standing while a plan runs. `tests/policy/test_policy_standing.py`
compares plans with and without a standing over random sequences of starts,
ends and changed jobs.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, overload

from .model import Node, RunningJob, Settings, Team, Tier, id_order
from .room import Room
from .runtime import expected_runtime

if TYPE_CHECKING:
    from .preemption import Reach

# (tier value, minus the time its unsaved work counts from, id order)
R8Key = tuple[int, int, tuple[bool, int, str]]


def r8_key(job: RunningJob, tiers: dict[str, Tier]) -> R8Key:
    """Returns a running job's place in R8's victim order within its group:
    lower tier first, then least unsaved work (the latest reported
    checkpoint, else its start), then id."""
    tier = tiers.get(job.tier) if job.tier else None
    saved = job.checkpointed
    return (tier.value if tier else 0, -(job.started if saved is None else saved), id_order(job.id))


class InOrder(Sequence[RunningJob]):
    """Jobs in an order kept as ids: each read from the jobs by id when read."""

    __slots__ = ("ids", "jobs")

    def __init__(self, ids: list[str], jobs: dict[str, RunningJob]) -> None:
        self.ids, self.jobs = ids, jobs

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, k: int) -> RunningJob: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[RunningJob]: ...

    def __getitem__(self, k: int | slice) -> RunningJob | Sequence[RunningJob]:
        if isinstance(k, slice):
            return [self.jobs[job_id] for job_id in self.ids[k]]
        return self.jobs[self.ids[k]]


class Standing:
    """Running jobs, indexed for the cycles that plan over them (see the
    module docstring): changed only through `add`, `remove` and `replace`."""

    def __init__(self, nodes: tuple[Node, ...], tiers: Iterable[Tier], settings: Settings) -> None:
        self.nodes = tuple(nodes)
        self.names = [n.name for n in nodes]
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self.tiers = {t.name: t for t in tiers}
        self.settings = settings
        self.jobs: dict[str, RunningJob] = {}  # by id, in the order of `running`
        self.gpu = [0] * len(nodes)
        self.cpu = [0] * len(nodes)
        self.memory = [0] * len(nodes)
        # (team, non-preemptible, GPU type or None) -> [GPU, CPU, memory]
        self.usage: dict[tuple[str | None, bool, str | None], list[int]] = {}
        # team -> GPU type of its GPUs (None: none, or no type) -> (R8 keys,
        # job ids), both in R8 order
        self.order: dict[str | None, dict[str | None, tuple[list[R8Key], list[str]]]] = {}
        # (start + expected runtime, id) of every job with an expected end, in order
        self.ends: list[tuple[int, str]] = []
        # id -> its R8 key, its end and the GPU type its GPUs count in
        self.marks: dict[str, tuple[R8Key, int | None, str | None]] = {}
        # Jobs holding GPUs that name no GPU type: their type is that of a
        # node, which a cycle with GPU types reads job by job.
        self.untyped = 0
        self._running: tuple[RunningJob, ...] | None = ()
        self._room: Room | None = None  # the room they leave, once asked for
        # team -> key -> (its quota, what victim searches' upper bounds
        # counted of its jobs), kept while its jobs stay as they are
        self._reaches: dict[str | None, dict[tuple, tuple[Team | None, Reach]]] = {}
        # id -> what the job holds in all and on each node by index, once a
        # cycle's state worked it out (`State._usage`); dropped when its room changes
        self.held: dict[str, tuple[tuple[int, int, int], dict[int, tuple[int, int, int]]]] = {}

    def reach(self, team: str, key: tuple, quota: Team | None) -> Reach | None:
        """Returns what a cycle kept with `keep_reach` of the team's jobs under
        `key` and the team's `quota`, while its jobs are the same; else None."""
        kept = self._reaches.get(team, {}).get(key)
        return kept[1] if kept is not None and kept[0] == quota else None

    def keep_reach(self, team: str, key: tuple, quota: Team | None, reach: Reach) -> None:
        """Keeps what a victim search's upper bound counted of the team's jobs
        (state.py reads it only for a team the cycle has not changed), until
        a job of the team starts, stops or moves in R8's order."""
        self._reaches.setdefault(team, {})[key] = (quota, reach)

    def room_left(self, empty: Room) -> Room:
        """Returns a copy of the room these jobs leave on `empty`, a cycle's
        room of the standing's nodes before any job takes room: what
        `empty.take_all` of the columns gives. Kept from call to call while
        the cycles' rooms are alike (same nodes and GPU types)."""
        kept = self._room
        if (kept is None or kept.names != empty.names or kept.part_of != empty.part_of
                or len(kept.parts) != len(empty.parts)):
            kept = self._room = empty.copy()
            kept.take_all(self.gpu, self.cpu, self.memory)
        return kept.copy()

    @property
    def running(self) -> tuple[RunningJob, ...]:
        """Returns the jobs as a snapshot lists them: the same tuple until one changes."""
        if self._running is None:
            self._running = tuple(self.jobs.values())
        return self._running

    def add(self, job: RunningJob) -> None:
        """Adds a job that started; raises ValueError when its id is held already."""
        if job.id in self.jobs:
            raise ValueError(f"job {job.id} is running already")
        self.jobs[job.id] = job
        kind = self._count(job, 1)
        keys, ids = self.order.setdefault(job.team, {}).setdefault(kind, ([], []))
        key = r8_key(job, self.tiers)
        k = bisect_left(keys, key)
        keys.insert(k, key)
        ids.insert(k, job.id)
        end = self._end(job)
        if end is not None:
            insort(self.ends, (end, job.id))
        self.marks[job.id] = (key, end, kind)
        self._reaches.pop(job.team, None)
        self._running = None

    def remove(self, job_id: str) -> RunningJob:
        """Takes out a job that stopped; returns it."""
        job = self.jobs.pop(job_id)
        self.held.pop(job_id, None)
        key, end, kind = self.marks.pop(job_id)
        keys, ids = self.order[job.team][kind]
        k = bisect_left(keys, key)
        del keys[k]
        del ids[k]
        if end is not None:
            del self.ends[bisect_left(self.ends, (end, job_id))]
        self._count(job, -1)
        self._reaches.pop(job.team, None)
        self._running = None
        return job

    def replace(self, job: RunningJob) -> None:
        """Puts `job` in place of the running job of the same id (a new
        checkpoint, a new estimate), where `running` lists that one."""
        old = self.jobs[job.id]
        if (old.team != job.team or old.tier != job.tier or old.replicas != job.replicas
                or old.nodes != job.nodes or old.gpu_type != job.gpu_type):
            self.remove(job.id)
            self.add(job)
            return
        # The same room and usage: only its place in R8's order and its end move.
        self.jobs[job.id] = job
        key, end, kind = self.marks[job.id]
        same_start = job.started == old.started
        new = (key if same_start and job.checkpointed == old.checkpointed
               else r8_key(job, self.tiers))
        moved = (end if same_start and job.estimate == old.estimate
                 and job.max_runtime == old.max_runtime else self._end(job))
        self.marks[job.id] = (new, moved, kind)
        if new != key:
            keys, ids = self.order[job.team][kind]
            k = bisect_left(keys, key)
            del keys[k]
            del ids[k]
            k = bisect_left(keys, new)
            keys.insert(k, new)
            ids.insert(k, job.id)
            self._reaches.pop(job.team, None)
        self._move_end(job.id, end, moved)
        self._running = None

    def reestimate(self, job: RunningJob) -> None:
        """Puts `job` in place of the running job of the same id that it
        differs from in its estimate alone (R14): only its end moves. What
        `replace` does then, without comparing the rest."""
        key, end, kind = self.marks[job.id]
        self.jobs[job.id] = job
        moved = self._end(job)
        if end != moved:
            self.marks[job.id] = (key, moved, kind)
            self._move_end(job.id, end, moved)
        self._running = None

    def _move_end(self, job_id: str, end: int | None, moved: int | None) -> None:
        """Moves a job's expected end from `end` to `moved` in `ends` (None: it has none)."""
        if end == moved:
            return
        ends = self.ends
        if end is not None:
            del ends[bisect_left(ends, (end, job_id))]
        if moved is not None:
            insort(ends, (moved, job_id))

    def below(self, team: str | None, value: int, *kind: str | None) -> list[RunningJob]:
        """Returns a team's jobs of a tier value below `value` (jobs of no
        tier count as 0), in R8 order: the first of `in_victim_order`; given
        a GPU type `kind`, only the jobs whose GPUs count in it."""
        if kind:
            keys, ids = self.order.get(team, {}).get(kind[0], ([], []))
        else:
            keys, ids = self._ordered(team)
        jobs = self.jobs
        return [jobs[job_id] for job_id in islice(ids, bisect_left(keys, (value,)))]

    def in_victim_order(self, team: str | None) -> Sequence[RunningJob]:
        """Returns a team's jobs in R8 order (`r8_key`), read as they are read."""
        return InOrder(self._ordered(team)[1], self.jobs)

    def of_type_in_victim_order(self, team: str | None, kind: str | None) -> Sequence[RunningJob]:
        """Returns a team's jobs whose GPUs count in GPU type `kind` (None:
        jobs holding no GPUs, or naming no type), in R8 order."""
        kept = self.order.get(team, {}).get(kind)
        return InOrder([] if kept is None else kept[1], self.jobs)

    def kinds(self) -> set[str | None]:
        """Returns the GPU types the jobs' GPUs count in (None: some hold none, or name none)."""
        return {kind for by_kind in self.order.values() for kind, (_, ids) in by_kind.items() if ids}

    def _ordered(self, team: str | None) -> tuple[list[R8Key], list[str]]:
        """Returns (R8 keys, ids) of all a team's jobs, in R8 order: those of
        its one GPU type, or all of them merged."""
        lists = [kept for kept in self.order.get(team, {}).values() if kept[1]]
        if not lists:
            return [], []
        if len(lists) == 1:
            return lists[0]
        merged = list(heapq.merge(*(zip(keys, ids) for keys, ids in lists)))
        return [key for key, _ in merged], [job_id for _, job_id in merged]

    def ends_from(self, now: int, slack: int) -> Iterator[tuple[int, str]]:
        """Yields (expected end, id) of every job with an expected end at
        `now`, soonest first (then by id): its start plus its expected
        runtime, or `now + slack` once that is not after `now` (R14). Reads
        only as far as the caller goes."""
        ends = self.ends
        past = bisect_left(ends, (now + 1,))  # the ends at or before now
        late = now + slack
        k = past
        size = len(ends)
        while k < size and ends[k][0] < late:
            yield ends[k]
            k += 1
        same = k
        while same < size and ends[same][0] == late:
            same += 1
        yield from heapq.merge(sorted((late, job_id) for _, job_id in islice(ends, past)),
                               islice(ends, k, same))
        yield from islice(ends, same, None)

    def _end(self, job: RunningJob) -> int | None:
        """Returns the job's start plus its expected runtime (R14); None for
        outside usage that states no runtime (nothing says it ends)."""
        if job.team is None and not job.max_runtime and not job.estimate:
            return None
        return job.started + expected_runtime(job.max_runtime, job.estimate, self.settings)

    def _count(self, job: RunningJob, sign: int) -> str | None:
        """Adds (`sign` 1) or takes away (-1) the job's room per node and
        usage; returns the GPU type its GPUs count in (None: it holds none,
        or names no type)."""
        index, gpu_column, cpu_column, memory_column = self.index, self.gpu, self.cpu, self.memory
        room = self._room
        g = c = m = 0
        k = 0
        nodes = job.nodes
        for group in job.replicas:
            rg, rc, rm = sign * group.gpu, sign * group.cpu, sign * group.memory
            for _ in range(group.count):
                g += rg
                c += rc
                m += rm
                i = index.get(nodes[k])
                k += 1
                if i is not None:
                    gpu_column[i] += rg
                    cpu_column[i] += rc
                    memory_column[i] += rm
                    if room is not None:
                        room.take(i, (rg, rc, rm))
        tier = self.tiers.get(job.tier) if job.tier else None
        kind = job.gpu_type if g else None
        if g and kind is None:
            self.untyped += sign
        key = (job.team, tier is not None and not tier.preemptible, kind)
        used = self.usage.get(key)
        if used is None:
            used = self.usage[key] = [0, 0, 0]
        used[0] += g
        used[1] += c
        used[2] += m
        if used == [0, 0, 0]:
            del self.usage[key]
        return kind
