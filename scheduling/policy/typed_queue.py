"""The typed estimate replay's waiting jobs and its cycle (see eta_typed.py).

A cycle's result is the same as walking every waiting job in R3 order (its
body is that walk's, job by job); it only passes by jobs whose visit could
change nothing the walk reads later. The jobs are kept per team, each
team's in R3 order, and a cycle merges the teams by their next job, so:
- a team held whole (R4: a starving job refused CPU or memory, or on a
  cluster without types) skips all its later jobs, so it leaves the walk;
- a team leaves once each (shape, type) of its jobs has its type held for
  it or for every team (the "hold" guard) or, in a settled cycle with
  reservations (no job could reserve room), no room: its jobs then start
  nothing, reserve nothing, and hold only their own team. Under the "hold"
  guard a shape without room does not count: a job with quota but no room
  holds its types for every team, which changes what later jobs try.
  A settled cycle with reservations walks only teams with a shape that has
  room; once every type of the queue is held for every team, it ends;
- in a settled cycle with reservations, a team's jobs with no room on any
  type open to them and admitted by R2 on one (a type, not None: the walk
  takes a job admitted only without a type as refused) are jumped over
  (`_jump`): starving, they would hold nothing. Should a job start before them, the
  team goes back to the first of them after it (`_rewind`): R2 may refuse
  it now, and then it holds the team.
All of this stands to the cycle's end: holds and shapes without room only
grow within a cycle, usage only grows, and a settled cycle stays settled.

Across cycles, with reservations, a team whose walk had no effect (it
started nothing, reserved nothing and held only its own types) sleeps out of
the walks until one of its jobs ends, R2's pool frees enough for a need it
was refused, a shape it found without room fits again, or a cycle may
reserve room (typed_sleep.py gives the argument). After a start, only the
pairs of the start's type (and those of no type) are tested for room again:
other types' nodes kept their room.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from .model import PendingJob
from .order import rewound
from .placement import place, usage_on_nodes
from .quota import Refusal
from .reservation import Hold, Holds, earliest_hold
from .runtime import expected_runtime
from .state import State
from .typed_sleep import Sleepers


class TypedQueue:
    """The jobs not yet started, per team in R3 order, with the shapes of
    the queue on each GPU type they could use (`combos`, how many jobs).
    A job's key (`keys`) is its place in the queue, which comes in R3 order:
    unique, and cheaper to compare than R3's own key."""

    def __init__(self, queue: list[PendingJob], kinds: dict, tiers) -> None:
        self.kinds = kinds
        self.tiers = tiers
        self.jobs: dict[str, list[PendingJob]] = {}
        self.keys: dict[str, list[int]] = {}
        # Per team, (shape, type) -> how many of its jobs could use it.
        self.pairs: dict[str, Counter] = {}
        self.combos: Counter = Counter()
        self.teams_with: dict[tuple, set[str]] = {}  # (shape, type) -> teams with such jobs
        # Jobs of one team asking the same (shape, tier preemptible, types)
        # share a line number: R2 and room answer them alike (see _jump).
        lines: dict[tuple, int] = {}
        self.lines: list[tuple] = []
        self.line_of: dict[str, list[int]] = {}
        # Per team, the places in its lists of the jobs the last cycle took.
        self.taken: dict[str, list[int]] = {}
        self.sleepers = Sleepers()  # teams out of the walk (typed_sleep.py)
        for rank, job in enumerate(queue):  # already in R3 order, so each team's list is too
            self.jobs.setdefault(job.team, []).append(job)
            self.keys.setdefault(job.team, []).append(rank)
            line = (job.team, job.demand, tiers[job.tier].preemptible, kinds[job.id])
            if line not in lines:
                lines[line] = len(self.lines)
                self.lines.append(line)
            self.line_of.setdefault(job.team, []).append(lines[line])
            pairs = self.pairs.setdefault(job.team, Counter())
            for k in kinds[job.id]:
                pairs[(job.demand, k)] += 1
                self.combos[(job.demand, k)] += 1
                self.teams_with.setdefault((job.demand, k), set()).add(job.team)

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def ended(self, team: str | None) -> None:
        """Notes that a job of `team` ended: its usage dropped."""
        self.sleepers.ended(team)

    def remove_taken(self) -> None:
        """Takes the jobs the last cycle started or gave a reservation out of
        the queue (by their places in their teams' lists, which the cycle
        noted in `taken`)."""
        for team, places in self.taken.items():
            pairs, jobs = self.pairs[team], self.jobs[team]
            for i in sorted(places, reverse=True):
                job = jobs[i]
                for k in self.kinds[job.id]:
                    pair = (job.demand, k)
                    for count in (pairs, self.combos):
                        count[pair] -= 1
                        if not count[pair]:
                            del count[pair]
                    if pair not in pairs:
                        self.teams_with[pair].discard(team)
                del jobs[i], self.keys[team][i], self.line_of[team][i]
            if not jobs:
                del self.jobs[team], self.keys[team], self.pairs[team], self.line_of[team]
        self.taken = {}

    def cycle(self, state: State, holds: Holds, settings, t: int,
              reserve: bool) -> tuple[list[PendingJob], list[Hold]]:
        """Runs one replayed cycle at virtual time `t`; returns the jobs started
        and the reservations made."""
        started: list[PendingJob] = []
        reserved: list[Hold] = []
        combos = self.combos
        no_room: set = set()
        held: set[str] = set()  # teams held whole
        held_types: set[tuple] = set()  # (team, GPU type) held; (None, GPU type): every team's
        # (team, tier, shape, types) refused by quota on every type: within a
        # cycle usage only grows, so the refusal stands for the rest of it.
        refused: set[tuple] = set()
        settled = not reserve or len(holds) >= settings.max_reservations
        fits: set = set()  # shapes on a type that fit, as room is since the last start on that type
        # Most cycles start nothing: a settled cycle first asks which shapes
        # have room at all, and ends at once when none has.
        if settled and shut(state, combos, no_room, fits):
            return started, reserved
        since = t - settings.starvation_after  # queued before then: starving
        # R2's answer per (team, need, tier preemptible, type): the same for
        # every such job until a start changes usage. Asked of the type's quota directly: selecting a
        # type is needed only to place.
        answers: dict[tuple, Refusal | None] = {}
        quotas, types = state.quotas, state.types
        assert quotas is not None and types is not None  # the replay on a cluster with types
        sleepers = self.sleepers
        sleepers.wake(quotas, fits if settled else None)
        # What each team's walk met, to put it to sleep should the walk have
        # had no effect (typed_sleep.py; with reservations only): R2's
        # refusals (quota, refusal); pairs R2 admitted without room; the
        # ranges of jobs jumped over, with the types then held for the team;
        # the teams that left with shapes still open but without room. A
        # team whose walk started or reserved something is `dirty`.
        refusals: dict[str, list] = {}
        rooms: dict[str, set] = {}
        jumps: dict[str, list] = {}
        held_kinds: dict[str, frozenset] = {}
        departed: set[str] = set()
        dirty: set[str] = set()
        tiers, kinds = self.tiers, self.kinds
        jobs_of, keys_of, pairs_of = self.jobs, self.keys, self.pairs
        # The teams merged by their next job: (its key, team, its index);
        # an entry whose index is not the team's in `at` is stale (`_rewind`
        # pushes a team again without looking for its entry).
        teams: Iterable[str] = keys_of
        if settled and reserve:  # a team with no shape that fits would leave at once
            teams = set().union(*(self.teams_with[pair] for pair in fits))
        if sleepers:
            teams = [team for team in teams if team not in sleepers]
        # A team sifts its pairs when what could drop some changed since this
        # mark: the walk begins with nothing held and, when settled with
        # reservations, only teams with a shape that has room.
        unsifted = (0, 0, len(no_room) if settled and reserve else 0)
        walk = [(keys_of[team][0], team, 0) for team in teams]
        heapq.heapify(walk)
        at: dict[str, int | None] = dict.fromkeys(keys_of, 0)
        # Per team, the range of its jobs jumped over since its last visit
        # (see _jump), to go back to should a job start before them.
        passed: dict[str, tuple[int, int]] = {}
        # Per team visited, the (shape, type) pairs of its jobs that might
        # still start or matter (see _sift), and when they were last sifted:
        # (holds for it, holds for every team, shapes without room).
        rest: dict[str, list] = {}
        sifted: dict[str, tuple] = {}
        # Per team, which of its lines a settled cycle may jump over, and when
        # that was known: (holds for it, holds for every team, starts).
        # Shapes without room only make more lines passable.
        passable: dict[str, dict[int, bool]] = {}
        known: dict[str, tuple] = {}
        # How often types were held for each team, and for every team: with
        # starts and shapes without room, all that changes the answers above.
        holds_of: dict[str, int] = {}
        held_every = 0
        every = {k for _, k in combos}  # the types the queue could use
        while walk:
            if settled and len(no_room) == len(combos):
                break
            _, team, i = heapq.heappop(walk)
            if at[team] != i or team in held:
                continue
            at[team] = None  # taken: a duplicate entry for `i` is stale now
            dead_go = settled and reserve
            mark = (holds_of.get(team, 0), held_every, len(no_room) if dead_go else 0)
            if sifted.get(team, unsifted) != mark:
                sifted[team] = mark
                left = rest[team] = self._sift(rest.get(team) or list(pairs_of[team]), team,
                                               held_types, no_room, dead_go)
                if not left:
                    departed.add(team)
                    continue
            jobs = jobs_of[team]
            if settled and reserve:
                mark = (holds_of.get(team, 0), held_every, len(started))
                if known.get(team) != mark:
                    known[team] = mark
                    passable[team] = {}
                c = self._jump(team, i, passable[team], held_types, no_room, answers, quotas)
                if c > i:
                    jumps.setdefault(team, []).append((i, c, held_kinds.get(team, frozenset())))
                    passed[team] = (i, c)
                    if c < len(jobs):
                        at[team] = c
                        heapq.heappush(walk, (keys_of[team][c], team, c))
                    continue
            passed.pop(team, None)
            job = jobs[i]
            if i + 1 < len(jobs):
                at[team] = i + 1
                heapq.heappush(walk, (keys_of[team][i + 1], team, i + 1))
            open_kinds = kinds[job.id]
            if held_types:
                open_kinds = tuple(k for k in open_kinds
                                   if (job.team, k) not in held_types and (None, k) not in held_types)
                if not open_kinds:
                    continue
            tier = tiers[job.tier]
            demand = job.demand
            line = (job.team, job.tier, demand, open_kinds)
            starving = job.queued < since
            if line in refused and not starving:
                continue
            quota_ok = None
            admits = []  # the types whose quota admits it
            placed = selected = False
            gpus_refused = True  # every refusal is of GPUs (of a type), none of CPU or memory
            for kind in open_kinds:
                ask = (job.team, demand.total, tier.preemptible, kind)
                if ask in answers:
                    refusal = answers[ask]
                else:
                    quota = quotas[0 if kind is None else kind]
                    refusal = answers[ask] = quota.refuse(job.team, demand.total, not tier.preemptible)
                if refusal is not None:
                    gpus_refused = gpus_refused and refusal.resource == 0
                    refusals.setdefault(team, []).append((0 if kind is None else kind, refusal))
                    continue
                admits.append(kind)
                if quota_ok is None:
                    quota_ok = kind
                if (demand, kind) in no_room:
                    rooms.setdefault(team, set()).add((demand, kind))
                    continue
                state.select(kind)
                selected = True
                placement = place(state.room, demand)
                if placement is None:
                    no_room.add((demand, kind))
                    rooms.setdefault(team, set()).add((demand, kind))
                    continue
                end = t + expected_runtime(job.max_runtime, job.estimate, settings)
                state.admit(job.id, job.team, tier, demand, placement, t, end)
                answers.clear()
                if holds:
                    holds.charge(usage_on_nodes(demand, placement), None)
                started.append(job)
                dirty.add(team)
                self.taken.setdefault(team, []).append(i)
                if passed:
                    self._rewind(keys_of[team][i], passed, at, walk)
                placed = True
                _forget_fits(fits, kind)
                break
            if selected:
                state.select(None)
            if quota_ok is None:
                refused.add(line)
            if placed and settled and shut(state, combos, no_room, fits):
                break
            if placed or not starving:
                continue
            if quota_ok is None and open_kinds:
                if None not in open_kinds and gpus_refused:
                    held_types.update((job.team, k) for k in open_kinds)
                    held_kinds[team] = held_kinds.get(team, frozenset()).union(open_kinds)
                    holds_of[team] = holds_of.get(team, 0) + 1
                else:
                    held.add(job.team)
            elif not reserve and None not in open_kinds:
                held_types.update((None, k) for k in admits)
                held_every += 1
                if all((None, k) in held_types for k in every):
                    break  # every type is held for every team: no job is visited again
            elif not reserve:
                break  # the whole cluster is held for this job
            elif len(holds) < settings.max_reservations:
                state.select(quota_ok)
                restore = holds.lifted()
                runtime = expected_runtime(job.max_runtime, job.estimate, settings)
                hold = earliest_hold(state, job.id, demand, runtime, holds)
                restore()
                state.select(None)
                if hold is not None:
                    hold.gpu_type = None if quota_ok is None else types.names[quota_ok]
                    holds.add(hold)
                    reserved.append(hold)
                    dirty.add(team)
                    self.taken.setdefault(team, []).append(i)
                    settled = len(holds) >= settings.max_reservations
                    if settled and shut(state, combos, no_room, fits):
                        break
        if reserve:
            for team in (refusals.keys() | rooms.keys() | jumps.keys() | departed) - dirty:
                if team in held or at[team] is None:  # its walk ran to its end
                    self._sleep(team, refusals.get(team, []), rooms.get(team, set()),
                                jumps.get(team, ()), team in departed,
                                held_kinds.get(team, frozenset()), quotas)
        return started, reserved

    def _sleep(self, team: str, refusals: list, rooms: set, jumps, departed: bool,
               held_kinds: frozenset, quotas) -> None:
        """Puts to sleep a team whose walk in this cycle had no effect, with
        what would wake it: its refusals, and the pairs on which R2 admitted
        a job of it without room (visited, jumped over, or, had it left the
        walk with types still open, all of those types' pairs)."""
        lines, line_of = self.lines, self.line_of[team]
        for i, c, held_then in jumps:
            for n in set(line_of[i:c]):
                _, demand, _, open_kinds = lines[n]
                rooms.update((demand, k) for k in open_kinds if k not in held_then)
        if departed:
            rooms.update(pair for pair in self.pairs[team] if pair[1] not in held_kinds)
        self.sleepers.sleep(team, refusals, rooms, quotas)

    def _jump(self, team: str, c: int, passable: dict[int, bool], held_types: set,
              no_room: set, answers: dict, quotas) -> int:
        """Returns the index of the first of a team's jobs from `c` that a
        settled cycle with reservations must visit: the jobs before it have
        no room on any type open to them and R2 admits them on one (see
        _passable), so a visit would start nothing, hold nothing and reserve
        nothing. R2 is
        asked as it answers now; `_rewind` goes back should a job start
        before the walk reaches them. `passable` keeps the answer per line."""
        lines = self.line_of[team]
        while c < len(lines):
            n = lines[c]
            ok = passable.get(n)
            if ok is None:
                ok = passable[n] = self._passable(n, held_types, no_room, answers, quotas)
            if not ok:
                return c
            c += 1
        return c

    def _passable(self, n: int, held_types: set, no_room: set, answers: dict, quotas) -> bool:
        """Returns whether a job of line `n` is visited without effect in a
        settled cycle with reservations: no type open to it, or no room on
        any open type and R2 admits it on one of them other than None (so,
        starving, it holds nothing)."""
        team, demand, preemptible, open_kinds = self.lines[n]
        if held_types:
            open_kinds = [k for k in open_kinds
                          if (team, k) not in held_types and (None, k) not in held_types]
        for k in open_kinds:
            if (demand, k) not in no_room:
                return False
        need = demand.total
        for kind in open_kinds:
            ask = (team, need, preemptible, kind)
            if ask in answers:
                refusal = answers[ask]
            else:
                quota = quotas[0 if kind is None else kind]
                refusal = answers[ask] = quota.refuse(team, need, not preemptible)
            # The walk takes the first admitting type other than None for
            # `quota_ok`: admitted only without a type, a job is taken as
            # refused and holds its team, so it is no job to jump over.
            if refusal is None and kind is not None:
                return True
        return not open_kinds

    def _rewind(self, key: int, passed: dict, at: dict, walk: list) -> None:
        """After the job with key `key` started, sends every team back to
        the first job it jumped over that comes after that job: R2 may
        refuse that job now, which holds the team."""
        for team, k in rewound(passed, self.keys, key):
            at[team] = k
            heapq.heappush(walk, (self.keys[team][k], team, k))

    @staticmethod
    def _sift(pairs: list, team: str, held_types: set, no_room: set, dead_go: bool) -> list:
        """Returns the (shape, type) pairs of `pairs` through which a later
        job of `team` could still change something in this cycle: not those
        of a type held for the team or for every team, nor (`dead_go`: a
        settled cycle with reservations) those without room. None left: the
        team leaves the walk."""
        return [(demand, k) for demand, k in pairs
                if (team, k) not in held_types and (None, k) not in held_types
                and not (dead_go and (demand, k) in no_room)]


def _forget_fits(fits: set, kind: int | None) -> None:
    """Drops from `fits` the pairs a start on GPU type `kind` may have left
    without room: those of that type, and those of no type (placed on any
    node); a start without a type may have taken room on every node."""
    if kind is None:
        fits.clear()
    else:
        fits.difference_update([pair for pair in fits if pair[1] == kind or pair[1] is None])


def shut(state: State, combos: Counter, no_room: set, fits: set) -> bool:
    """Returns whether no shape of the queue has room on any type it could
    use, testing the pairs not yet known (room only shrinks within a cycle,
    so a pair without room stays without it: `no_room` holds what a job of
    that pair would find when tried)."""
    for demand, kind in combos:
        if (demand, kind) in no_room or (demand, kind) in fits:
            continue
        state.select(kind)
        room = state.room
        widest = max((g[1] for g in demand.groups), default=0)
        if widest > room.largest_free_gpu() or place(room, demand) is None:
            no_room.add((demand, kind))
        else:
            fits.add((demand, kind))
    state.select(None)
    return len(no_room) == len(combos)
