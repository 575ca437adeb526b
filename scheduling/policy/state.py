"""The working state of one cycle: node room, team usage and who holds what.

Kueue's habit: every admission adds its usage here so later entries see it.
A victim search counts its candidates as gone beside it (preemption.py) and
takes out only the victims it keeps.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from .demand import Demand, Vector, add_to, per_node_usage
from .model import RunningJob, Snapshot, Tier, id_order
from .placement import Placement, usage_on_nodes
from .quota import Quota
from .room import Room
from .runtime import expected_end, merge_ends
from .standing import Standing, r8_key
from .types import Types

if TYPE_CHECKING:
    from .preemption import Reach


@dataclass(slots=True, init=False)
class Holder:
    """A job holding room: running at the snapshot, or admitted this cycle.

    `fresh` marks jobs admitted in this cycle (never victims); `taken` marks
    jobs already chosen as victims by an earlier preemptor; `end` is when it
    is expected to end (R14), None when nothing says it will.

    Its own `__init__`, as `Refusal`'s (quota.py): a dataclass's generated
    one runs interpreted in the compiled policy.
    """

    id: str
    team: str | None
    tier: Tier | None
    started: int
    usage: Vector
    on_nodes: dict[int, Vector]
    # The R8 order within a group: lower tier, least unsaved work (the most
    # recent checkpoint, else start), id.
    key: tuple[int, int, tuple[bool, int, str]]
    fresh: bool = False
    taken: bool = False
    end: int | None = None
    # The index of the GPU type its GPUs are of (types.py); None: no type.
    kind: int | None = None
    # Being preempted already by an earlier cycle, the cluster refusing to
    # stop it, or being cancelled (RunningJob.stopping): never a victim.
    stopping: bool = False

    def __init__(self, id: str, team: str | None, tier: Tier | None, started: int,
                 usage: Vector, on_nodes: dict[int, Vector],
                 key: tuple[int, int, tuple[bool, int, str]], fresh: bool = False,
                 taken: bool = False, end: int | None = None, kind: int | None = None,
                 stopping: bool = False) -> None:
        self.id = id
        self.team = team
        self.tier = tier
        self.started = started
        self.usage = usage
        self.on_nodes = on_nodes
        self.key = key
        self.fresh = fresh
        self.taken = taken
        self.end = end
        self.kind = kind
        self.stopping = stopping

    @classmethod
    def of(cls, id: str, team: str | None, tier: Tier | None, started: int, usage: Vector,
           on_nodes: dict[int, Vector], fresh: bool = False, *, end: int | None = None,
           saved: int | None = None, kind: int | None = None, stopping: bool = False) -> Holder:
        """Returns a holder with its victim order key; `saved` is its last
        reported checkpoint, if any."""
        key = (tier.value if tier else 0, -(started if saved is None else saved), id_order(id))
        return Holder(id, team, tier, started, usage, on_nodes, key, fresh, False, end, kind,
                      stopping)

    @property
    def steady(self) -> bool:
        """Returns whether the job runs at a non-preemptible tier."""
        return self.tier is not None and not self.tier.preemptible


def own_candidate(tier: Tier | None, started: int, value: int, since: int) -> bool:
    """Returns whether a running job of a preemptor's own team, at `tier` and
    started at `started`, may be its victim (R5): a preemptible tier below the
    preemptor's `value`, and started by `since` (past the thrash guard)."""
    return tier is not None and tier.preemptible and tier.value < value and started <= since


class Held:
    """A team's running jobs as holders in R8 victim order, each built the
    first time it is read; indexed from 0 up, or walked in order."""

    __slots__ = ("_make", "_jobs", "_built")

    def __init__(self, make: Callable[[RunningJob], Holder], jobs: Sequence[RunningJob]) -> None:
        self._make = make
        self._jobs = jobs
        self._built: list[Holder] = []

    def __len__(self) -> int:
        return len(self._jobs)

    def __getitem__(self, k: int) -> Holder:
        built = self._built
        while len(built) <= k:
            built.append(self._make(self._jobs[len(built)]))
        return built[k]

    def __iter__(self) -> Iterator[Holder]:
        for k in range(len(self._jobs)):
            yield self[k]


class State:
    """Room, quota and holders, changed only through admit and remove.

    Room and quota are charged per node and per team in one sum, which is
    what every cycle needs. A team's jobs (`held`) are put in R8 order the
    first time a victim search asks for that team, and each job's holder is
    built when the search reads that far (a search reads the first few; the
    upper bound of its own team sums the jobs without holders,
    `own_victims`); all of them (`holders`) when the ETA replay asks: most
    cycles admit what fits and look at the running jobs of few teams, if
    any, so a cycle over many running jobs costs one pass of additions.

    On a cluster with GPU types (types.py) each type has its quota, and
    `select(kind)` points `room` and `quota` at that type's nodes and quota
    while a job is tried on it, so placement, quota and victim search need
    not know about types; `held` then lists only holders of that type, so a
    victim search never takes another type's GPUs. Every change of usage is
    charged to every type's quota (CPU and memory are untyped), its GPUs only
    to its own type's.
    """

    def __init__(self, snapshot: Snapshot, standing: Standing | None = None) -> None:
        self.now = snapshot.now
        self.settings = snapshot.settings
        nodes = snapshot.nodes
        # Only schedulable nodes take room: a cordoned or tainted node is
        # left out of everything but R10, as if the snapshot did not list it.
        placeable = nodes if all(n.schedulable for n in nodes) else tuple(
            n for n in nodes if n.schedulable)
        self.types = Types.of(snapshot, placeable)
        types = self.types
        self.whole = (Room(placeable) if types is None
                      else Room(placeable, types.node_kinds, len(types.names)))
        self.room = self.whole
        # The room of the empty cluster, for R10: every node, the ones that
        # take no pods now too (they may again). Without such nodes, a copy
        # before any job is charged, cheaper than indexing the nodes again;
        # with them, `open` is the empty room of the schedulable nodes, and
        # `unschedulable` says why each other node of `empty` takes no pods.
        self.open: Room | None = None
        self.unschedulable: dict[int, str] = {}
        if placeable is nodes:
            self.empty = self.whole.copy()
        else:
            self.open = self.whole.copy()
            self.empty = (Room(nodes) if types is None
                          else Room(nodes, types.ever_kinds, len(types.names)))
            self.unschedulable = {i: n.unschedulable or "not schedulable"
                                  for i, n in enumerate(nodes) if not n.schedulable}
        capacity = tuple(self.whole.total)  # nothing is charged yet
        self.kind: int | None = None
        # GPU type -> whether a shape fits the empty cluster's nodes of that type (R10),
        # and its schedulable nodes (`open`).
        self.empty_fits: dict[int | None, dict[object, bool]] = {}
        self.open_fits: dict[int | None, dict[object, bool]] = {}
        if types is None:
            self.quota = Quota(snapshot.teams, capacity, self.empty.total)
            self.quotas: list[Quota] | None = None
        else:
            self.quotas = [Quota(teams, cap, ever) for teams, cap, ever
                           in zip(types.teams, types.capacity, types.ever)]
            self.quota = self.quotas[0]
        self.teams = tuple(t.name for t in snapshot.teams)
        self._tiers = {t.name: t for t in snapshot.tiers}
        # team (None: outside usage or a team the snapshot does not list) ->
        # its running jobs, then its holders once built.
        self._running: dict[str | None, list[RunningJob]] = {name: [] for name in self.teams}
        self._running[None] = []
        self._held: dict[object, Held | list[Holder]] = {}
        self._holders: dict[str, Holder] | None = None
        # job id -> its holder, once built; and the running jobs
        # `expected_ends` saw without one, so `on_nodes` can read their room.
        self._made: dict[str, Holder] = {}
        self._unbuilt: dict[str, RunningJob] = {}
        self._fresh: dict[str, Holder] = {}
        self._taken = False  # whether a victim was taken in this cycle
        # Teams whose usage or jobs changed in this cycle (an admission, a
        # victim): what a standing kept of them no longer holds.
        self._changed: set[str | None] = set()
        # team -> GPU type (None: no type) -> what victim searches' upper
        # bounds counted of it, kept while its jobs and usage stay as they are.
        self._reaches: dict[str | None, dict[int | None, dict[tuple, Reach]]] = {}
        # The running jobs indexed by the caller (standing.py), when they are
        # this snapshot's: read instead of going over every running job.
        self._standing: Standing | None = None
        if standing is not None and self._indexes(standing, snapshot):
            self._charge_standing(standing)
        else:
            self._charge_running(snapshot.running)

    def select(self, kind: int | None) -> None:
        """Points `room`, `quota` and `held` at GPU type `kind` (None: all
        nodes, no type, as on a cluster without types)."""
        if self.quotas is None:
            return
        self.kind = kind
        self.room = self.whole.part(kind)
        self.quota = self.quotas[0 if kind is None else kind]

    def charge(self, team: str | None, v: Vector, steady: bool, kind: int | None) -> None:
        """Charges usage `v` of GPU type `kind` to the team's quota (of every
        type: CPU and memory are untyped; the GPUs to `kind`'s only)."""
        if self.quotas is None:
            self.quota.charge(team, v, steady)
            return
        untyped = (0, v[1], v[2])
        for k, quota in enumerate(self.quotas):
            quota.charge(team, v if k == kind else untyped, steady)

    def credit(self, team: str | None, v: Vector, steady: bool, kind: int | None) -> None:
        """Takes usage `v` of GPU type `kind` off the team's quota."""
        self.charge(team, (-v[0], -v[1], -v[2]), steady, kind)

    def borrowing(self, team: str) -> bool:
        """Returns whether a team uses more than its nominal, in any type."""
        if self.quotas is None:
            return self.quota.above_nominal(team, (0, 1, 2))
        return any(q.above_nominal(team, (0, 1, 2)) for q in self.quotas)

    def _charge_running(self, running: tuple[RunningJob, ...]) -> None:
        """Takes the running jobs' room per node, charges their usage per team
        and files them by team.

        A node the snapshot no longer lists, or lists as not schedulable
        (cordoned, tainted), holds no room; the usage still counts against quota.
        """
        index, tiers, by_team = self.room.index, self._tiers, self._running
        every = self.empty.index  # every node, for the type a job naming none counts in
        # Room taken per node, as GPU, CPU and memory columns in node order.
        size = len(self.room.gpu)
        taken_gpu, taken_cpu, taken_memory = [0] * size, [0] * size, [0] * size
        per_team: dict[tuple[str | None, bool, int | None], list[int]] = {}
        types = self.types
        for job in running:
            replicas = job.replicas
            if len(replicas) == 1 and replicas[0].count == 1:  # most jobs: one replica
                group = replicas[0]
                g, c, m = group.gpu, group.cpu, group.memory
                i = index.get(job.nodes[0])
                if i is not None:
                    taken_gpu[i] += g
                    taken_cpu[i] += c
                    taken_memory[i] += m
            else:  # a gang, or an outside job over many nodes
                g = c = m = 0
                for group, name in zip(_expand(replicas), job.nodes):
                    rg, rc, rm = group.gpu, group.cpu, group.memory
                    g += rg
                    c += rc
                    m += rm
                    i = index.get(name)
                    if i is not None:
                        taken_gpu[i] += rg
                        taken_cpu[i] += rc
                        taken_memory[i] += rm
            tier = tiers.get(job.tier) if job.tier else None
            kind = None if types is None else types.running_kind(job, every)
            key = (job.team, tier is not None and not tier.preemptible, kind)
            add_to(per_team, key, g, c, m)
            by_team.get(job.team, by_team[None]).append(job)
        self.room.take_all(taken_gpu, taken_cpu, taken_memory)
        for (team, steady, kind), (g, c, m) in per_team.items():
            self.charge(team, (g, c, m), steady, kind)

    def _indexes(self, standing: Standing, snapshot: Snapshot) -> bool:
        """Returns whether `standing` holds this snapshot's running jobs as
        `_charge_running` would file them: its very `running` tuple, on the
        snapshot's nodes as they are (their sizes too, which its kept room
        is of), all of them schedulable, with the snapshot's tiers and settings, every job
        of a listed team or outside usage, and with GPU types every job
        holding GPUs naming one of the snapshot's types."""
        return (snapshot.running is standing.running
                and standing.nodes == snapshot.nodes
                and standing.names == self.room.names
                and standing.tiers == self._tiers
                and standing.settings == self.settings
                and all(team is None or team in self._running
                        for team, by_kind in standing.order.items()
                        if any(ids for _, ids in by_kind.values()))
                and (self.types is None or not standing.untyped
                     and all(kind is None or kind in self.types.index for kind in standing.kinds())))

    def _charge_standing(self, standing: Standing) -> None:
        """Takes the room and charges the usage the running jobs of `standing`
        hold, as `_charge_running` would from the same jobs, without going
        over them: held, `own_victims` and the ends read the standing."""
        self._standing = standing
        self._unbuilt = standing.jobs  # read only, for `on_nodes` and `touches`
        self.whole = self.room = standing.room_left(self.whole)
        types = self.types
        for (team, steady, gpu_type), (g, c, m) in standing.usage.items():
            kind = None if types is None or gpu_type is None else types.index.get(gpu_type)
            self.charge(team, (g, c, m), steady, kind)

    def held(self, team: str | None) -> Held | list[Holder]:
        """Returns a team's running jobs as holders, in R8 victim order (never
        the jobs admitted in this cycle); [] for a team the snapshot does not list.
        With GPU types, only its holders of the selected type."""
        if self.types is None:
            holders = self._held.get(team)
            if holders is None:
                holders = self._held[team] = self._team_held(team)
            return holders
        key = (team, self.kind)
        holders = self._held.get(key)
        if holders is None and self._standing is not None:
            # The standing keeps each type's jobs in R8 order apart.
            name = None if self.kind is None else self.types.names[self.kind]
            holders = self._held[key] = Held(
                self._holder, self._standing.of_type_in_victim_order(team, name))
        elif holders is None:
            every = self._held.get((team, "all"))
            if every is None:
                every = self._held[(team, "all")] = self._team_held(team)
            holders = self._held[key] = [h for h in every if h.kind == self.kind]
        return holders

    def _all_held(self, team: str | None) -> Held | list[Holder]:
        """Returns a team's running jobs as holders, of every type."""
        if self.types is None:
            return self.held(team)
        key = (team, "all")
        if key not in self._held:
            self._held[key] = self._team_held(team)
        return self._held[key]

    def _team_held(self, team: str | None) -> Held:
        """Returns a team's running jobs as holders in R8 victim order, each
        built when first read: in the order the standing keeps, else sorted."""
        if self._standing is not None:
            return Held(self._holder, self._standing.in_victim_order(team))
        return self._build(self._running.get(team, ()))

    def _build(self, running) -> Held:
        """Returns the holders of `running` in R8 victim order, each built the
        first time it is read (a victim search reads the first few of a
        team's jobs) and once per cycle, so a job has one holder however it
        was asked for. The order is `Holder.key`, worked out from the jobs."""
        tiers = self._tiers
        keyed = [(r8_key(job, tiers), job) for job in running]
        keyed.sort(key=itemgetter(0))  # ids are unique: jobs are never compared
        return Held(self._holder, [job for _, job in keyed])

    def _holder(self, job: RunningJob) -> Holder:
        """Returns a running job's holder, built the first time it is asked for."""
        holder = self._made.get(job.id)
        if holder is None:
            usage, on_nodes = self._usage(job)
            types = self.types
            holder = self._made[job.id] = Holder.of(
                job.id, job.team, self._tiers.get(job.tier) if job.tier else None, job.started,
                usage, on_nodes, end=expected_end(job, self.now, self.settings),
                saved=job.checkpointed,
                kind=None if types is None else types.running_kind(job, self.empty.index),
                stopping=job.stopping)
        return holder

    def own_victims(self, team: str, value: int,
                    since: int) -> list[tuple[Vector, dict[int, Vector]]] | None:
        """Returns (usage, on nodes) of each running job of
        `team` at a preemptible tier below `value`, started by `since` and not
        taken: every job of its own team a preemptor of tier `value` could
        take (R5), read without building a holder for the jobs not built yet;
        with GPU types, of the selected type, and None without a standing (a
        search then reads the holders of its type)."""
        tiers, made = self._tiers, self._made
        found = []
        # From a standing, only the team's jobs of tiers below `value`: the
        # first in R8's order. The order of `found` changes no sum a search takes.
        standing = self._standing
        if standing is None:
            if self.types is not None:
                return None
            jobs: Iterable[RunningJob] = self._running.get(team, ())
        elif self.types is None:
            jobs = standing.below(team, value)
        else:
            jobs = standing.below(team, value, None if self.kind is None
                                  else self.types.names[self.kind])
        for job in jobs:
            if job.stopping or not own_candidate(tiers.get(job.tier) if job.tier else None, job.started,
                                                 value, since):
                continue
            holder = made.get(job.id)
            if holder is None:
                usage, on_nodes = self._usage(job)
                found.append((usage, on_nodes))
            elif not holder.taken:
                found.append((holder.usage, holder.on_nodes))
        return found

    def _usage(self, job: RunningJob) -> tuple[Vector, dict[int, Vector]]:
        """Returns what a running job holds in all, and on each listed node;
        of a standing's job, worked out once while the job stays the same
        (the standing's nodes are the room's, `_indexes`)."""
        standing = self._standing
        if standing is None or standing.jobs.get(job.id) is not job:
            return self._add_up(job)
        kept = standing.held.get(job.id)
        if kept is None:
            kept = standing.held[job.id] = self._add_up(job)
        return kept

    def _add_up(self, job: RunningJob) -> tuple[Vector, dict[int, Vector]]:
        index = self.room.index
        replicas = job.replicas
        if len(replicas) == 1 and replicas[0].count == 1:  # most jobs: one replica
            group = replicas[0]
            usage = (group.gpu, group.cpu, group.memory)
            i = index.get(job.nodes[0])
            return usage, {} if i is None else {i: usage}
        nodes = job.nodes
        held: Iterable[tuple[str, Vector]]
        if len(replicas) == len(nodes) and len(set(nodes)) == len(nodes):
            # One replica per group, each on a node of its own (an outside
            # job over many nodes): nothing to add up per node.
            held = zip(nodes, [(group.gpu, group.cpu, group.memory) for group in replicas])
        else:
            held = per_node_usage(replicas, nodes).items()
        on_nodes = {}
        g = c = m = 0
        for name, v in held:
            g += v[0]
            c += v[1]
            m += v[2]
            i = index.get(name)
            if i is not None:
                on_nodes[i] = v
        return (g, c, m), on_nodes

    def expected_ends(self) -> list[tuple[int, str]]:
        """Returns (expected end, job id) of every job holding room that has
        an expected end (R14) and is not taken as a victim: running, or
        admitted in this cycle.

        Unlike `holders` it builds no holder: a search for the first end
        that makes room (reservation.py) reads the room of few of them,
        through `on_nodes`.
        """
        if self._holders is not None:
            return [(h.end, h.id) for h in self._holders.values()
                    if h.end is not None and not h.taken]
        if self._standing is not None:
            return list(self.ends_in_order())
        now, settings = self.now, self.settings
        made, unbuilt = self._made, self._unbuilt
        found = []
        for jobs in self._running.values():
            for job in jobs:
                holder = made.get(job.id)
                if holder is None:
                    unbuilt[job.id] = job
                    end = expected_end(job, now, settings)
                    if end is not None:
                        found.append((end, job.id))
                elif holder.end is not None and not holder.taken:
                    found.append((holder.end, holder.id))
        found.extend((h.end, h.id) for h in self._fresh.values() if h.end is not None)
        return found

    def ends_in_order(self) -> Iterator[tuple[int, str]]:
        """Returns what `expected_ends` returns, soonest first (then by id),
        working out only as much of the order as the caller reads: from the
        ends the standing keeps in order, when there is one, else from a heap."""
        if self._standing is None or self._holders is not None:
            return _soonest_first(self.expected_ends())
        ends = self._standing.ends_from(self.now, self.settings.reservation_slack)
        fresh = sorted((h.end, h.id) for h in self._fresh.values() if h.end is not None)
        if fresh:
            ends = merge_ends(ends, fresh)
        return self._not_taken(ends) if self._taken else ends

    def _not_taken(self, ends: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """Yields the ends of jobs not taken as victims."""
        made = self._made
        for end, job_id in ends:
            holder = made.get(job_id)
            if holder is None or not holder.taken:
                yield end, job_id

    def on_nodes(self, job_id: str) -> dict[int, Vector]:
        """Returns what a job `expected_ends` returned holds on each node,
        without building its holder."""
        holder = self._fresh.get(job_id) or self._made.get(job_id)
        if holder is not None:
            return holder.on_nodes
        return self._usage(self._unbuilt[job_id])[1]

    def touches(self, job_id: str, nodes: set[int], names: set[str]) -> bool:
        """Returns whether a job `expected_ends` returned holds room on any
        of `nodes` (`names` are theirs), without working out its room."""
        holder = self._fresh.get(job_id) or self._made.get(job_id)
        if holder is not None:
            return not nodes.isdisjoint(holder.on_nodes)
        return not names.isdisjoint(self._unbuilt[job_id].nodes)

    def reaches(self, team: str | None) -> dict[tuple, Reach]:
        """Returns what victim searches keep about a team's jobs, emptied
        whenever the team admits a job or loses one to a preemptor (each GPU
        type's apart; without types `kind` stays None)."""
        kept = self._reaches.get(team)
        if kept is None:
            kept = self._reaches[team] = {}
        of_kind = kept.get(self.kind)
        if of_kind is None:
            of_kind = kept[self.kind] = {}
        return of_kind

    def lasting_reach(self, team: str, key: tuple) -> Reach | None:
        """Returns what the standing kept of the team's jobs for `reaches`
        under `key`, from an earlier cycle with the same jobs, while this
        cycle has not changed the team; None when it kept nothing that holds
        (with GPU types, of the selected type)."""
        standing = self._standing
        if standing is None or team in self._changed:
            return None
        return standing.reach(team, (self.kind, key), self.quota.teams.get(team))

    def keep_reach(self, team: str, key: tuple, reach: Reach) -> None:
        """Lets the standing keep a reach worked out while this cycle has not
        changed the team, for later cycles over the same jobs."""
        standing = self._standing
        if standing is not None and team not in self._changed:
            standing.keep_reach(team, (self.kind, key), self.quota.teams.get(team), reach)

    def take(self, victims) -> None:
        """Marks a preemptor's victims, already counted as gone, as taken:
        no later preemptor may take them again (R8)."""
        for victim in victims:
            victim.taken = True
            self._taken = True
            self._reaches.pop(victim.team, None)
            self._changed.add(victim.team)

    @property
    def holders(self) -> dict[str, Holder]:
        """Returns every holder by job id: running, admitted or held."""
        if self._holders is None:
            self._holders = {h.id: h for team in self._running for h in self._all_held(team)}
            self._holders.update(self._fresh)
        return self._holders

    def admitted(self, job_id: str) -> Holder:
        """Returns the holder of a job admitted in this cycle, without
        building the running jobs' holders as `holders` does."""
        return self._fresh[job_id]

    def release(self, holder: Holder) -> None:
        """Takes a holder's usage out of room and quota for good (a job
        ended, or a victim was chosen)."""
        for i, v in holder.on_nodes.items():
            self.room.give(i, v)
        self.credit(holder.team, holder.usage, holder.steady, holder.kind)
        self._changed.add(holder.team)

    def restore(self, holder: Holder) -> None:
        """Charges a holder's usage to room and quota again (undoes `release`)."""
        for i, v in holder.on_nodes.items():
            self.room.take(i, v)
        self.charge(holder.team, holder.usage, holder.steady, holder.kind)
        self._changed.add(holder.team)

    def admit(self, job_id: str, team: str, tier: Tier, demand: Demand,
              placement: Placement, started: int, end: int | None = None) -> Holder:
        """Adds an admitted job's usage to room and quota; returns its holder,
        expected to end at `end`."""
        on_nodes = usage_on_nodes(demand, placement)
        for i, v in on_nodes.items():
            self.room.take(i, v)
        holder = Holder.of(job_id, team, tier, started, demand.total, on_nodes, fresh=True,
                           end=end, kind=self.kind)
        self.charge(team, demand.total, holder.steady, self.kind)
        self._reaches.pop(team, None)
        self._changed.add(team)
        self._keep(holder)
        return holder

    def hold(self, holder: Holder) -> None:
        """Adds a copy of a holder from another state (same node indices)."""
        copy = Holder.of(holder.id, holder.team, holder.tier, holder.started, holder.usage,
                         dict(holder.on_nodes), end=holder.end, kind=holder.kind)
        for i, v in copy.on_nodes.items():
            self.room.take(i, v)
        self.charge(copy.team, copy.usage, copy.steady, copy.kind)
        self._changed.add(copy.team)
        self._keep(copy)

    def _keep(self, holder: Holder) -> None:
        """Records a holder that is not one of the snapshot's running jobs."""
        self._fresh[holder.id] = holder
        if self._holders is not None:
            self._holders[holder.id] = holder

    def reserve(self, before: dict[int, Vector]) -> None:
        """Takes back any room above `before` on those nodes, so room freed by
        a job's victims serves only that job in this cycle (R8)."""
        for i, (g, c, m) in before.items():
            now = self.room.free(i)
            extra = (max(0, now[0] - g), max(0, now[1] - c), max(0, now[2] - m))
            if extra != (0, 0, 0):
                self.room.take(i, extra)


def _soonest_first(items: list) -> Iterator:
    """Yields `items` in ascending order, sorting only as far as it is read
    (a heap: a walk that stops early pays for what it read)."""
    heapq.heapify(items)
    while items:
        yield heapq.heappop(items)


def _expand(replicas):
    """Returns each replica's group, in the order the replica groups expand:
    the groups themselves when each is one replica (outside jobs are one
    replica per node)."""
    for group in replicas:
        if group.count != 1:
            return [group for group in replicas for _ in range(group.count)]
    return replicas
