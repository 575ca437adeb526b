"""Each team's GPUs once a cycle's admissions count: what pages, the API,
`/metrics` and usage samples show, computed here once so they agree with R2.

- `used`: GPUs of the team's running jobs that are not victims of this
  cycle, plus the jobs it admits;
- `within` and `borrowed`: used up to its nominal, and above it;
- `lent`: of its unused nominal, what borrowers take. Borrowing comes first
  from unassigned capacity (`max(0, capacity - sum of nominals)`), then from
  lenders, each in proportion to what it may lend: its unused nominal up to
  its `lending_limit` (R2, the arithmetic of quota.py). A team with a lending
  limit of 0 never lends;
- `borrowed_from`: which lenders a borrower's GPUs come from (the rest comes
  from unassigned capacity), so every lender's `lent` is the sum of what
  borrowers take from it;
- `idle`: unused nominal nobody borrows;
- `waiting`: GPUs asked by its jobs that wait in this plan.

A team whose quota does not name GPUs has a nominal of 0: what it uses
counts as borrowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .demand import GPU
from .model import Admission, Snapshot, TeamGpus
from .quota import Quota
from .state import State


def team_gpus(snapshot: Snapshot, admitted: Sequence[Admission], waiting: Iterable[str],
              state: State) -> tuple[TeamGpus, ...]:
    """Returns every snapshot team's GPU figures, in snapshot order, once
    `admitted` (with their victims gone) count; `waiting` names the jobs that wait.
    On a cluster with GPU types, each figure is the sum of the team's figures
    of each type (a waiting job counts for its first type), and `by_type`
    holds those figures, each computed against that type's quota alone, so
    no type lends to or borrows from another."""
    types = state.types
    if types is None:
        return _figures(snapshot, snapshot.running, admitted, list(waiting), state.quota)
    quotas = state.quotas
    assert quotas is not None  # a state with types has a quota per type
    index = state.empty.index  # every node: a job on a cordoned one counts in its type
    pending = {job.id: job for job in snapshot.pending}
    teams = {t.name: t for t in snapshot.teams}
    waiting = list(waiting)
    per_type = []
    for kind, name in enumerate(types.names):
        running = [j for j in snapshot.running if types.running_kind(j, index) == kind]
        mine = [a for a in admitted if a.gpu_type == name]
        asked = [i for i in waiting
                 if types.candidates(pending[i], teams[pending[i].team])[0] == kind]
        per_type.append(_figures(snapshot, running, mine, asked, quotas[kind]))
    order = {name: k for k, name in enumerate(teams)}
    return tuple(_summed(figures, types.names, order) for figures in zip(*per_type))


def _summed(figures: tuple[TeamGpus, ...], names: tuple[str, ...], order: dict[str, int]) -> TeamGpus:
    """Returns one team's figures of every GPU type added up, its lenders in
    snapshot team order, carrying each type's own figures (`by_type`, one per
    name of `names`) so pages show per type what the total adds up."""
    loans: dict[str, int] = {}
    for f in figures:
        for lender, gpus in f.borrowed_from:
            loans[lender] = loans.get(lender, 0) + gpus
    nominal, used, within, borrowed, lent, idle, waiting = (
        sum(getattr(f, name) for f in figures)
        for name in ("nominal", "used", "within", "borrowed", "lent", "idle", "waiting"))
    return TeamGpus(figures[0].team, nominal, used, within, borrowed, lent, idle, waiting,
                    tuple(sorted(loans.items(), key=lambda loan: order[loan[0]])),
                    tuple(zip(names, figures)))


def _figures(snapshot: Snapshot, running, admitted: Sequence[Admission], waiting: list[str],
             quota: Quota) -> tuple[TeamGpus, ...]:
    """Returns every team's GPU figures from `running` and `admitted` against `quota`."""
    names = [t.name for t in snapshot.teams]
    used = dict.fromkeys(names, 0)
    gone = {victim for admission in admitted for victim in admission.victims}
    for job in running:
        if job.team in used and job.id not in gone:
            used[job.team] += sum(group.count * group.gpu for group in job.replicas)
    pending = {job.id: job for job in snapshot.pending}
    for admission in admitted:
        job = pending[admission.id]
        used[job.team] += job.demand.total[GPU]
    asked = dict.fromkeys(names, 0)
    for job_id in waiting:
        job = pending[job_id]
        asked[job.team] += job.demand.total[GPU]

    nominal = {n: quota.nominal[n][GPU] if GPU in quota.named[n] else 0 for n in names}
    borrowed = {n: max(0, used[n] - nominal[n]) for n in names}
    # What each team may lend now: its unused nominal, at most its lending limit.
    spare = {n: min(nominal[n] - quota.guaranteed[n][GPU], max(0, nominal[n] - used[n]))
             if GPU in quota.named[n] else 0 for n in names}
    from_lenders = min(sum(spare.values()), max(0, sum(borrowed.values()) - quota.unassigned[GPU]))
    lent = _shares(from_lenders, spare)
    taken = _shares(from_lenders, borrowed)
    loans = _pairs(lent, taken)
    return tuple(
        TeamGpus(n, nominal[n], used[n], min(used[n], nominal[n]), borrowed[n], lent[n],
                 max(0, nominal[n] - used[n]) - lent[n], asked[n], loans.get(n, ()))
        for n in names
    )


def _shares(total: int, weights: dict[str, int]) -> dict[str, int]:
    """Returns `total` split in proportion to `weights` in whole GPUs that add
    up to it (largest remainder; ties go to the earlier team)."""
    whole = sum(weights.values())
    if not total or not whole:
        return dict.fromkeys(weights, 0)
    shares = {n: total * w // whole for n, w in weights.items()}
    order = sorted(weights, key=lambda n: -(total * weights[n] % whole))
    for n in order[: total - sum(shares.values())]:
        shares[n] += 1
    return shares


def _pairs(lent: dict[str, int], taken: dict[str, int]) -> dict[str, tuple[tuple[str, int], ...]]:
    """Returns, per borrower, the (lender, GPUs) that make up what it takes
    from lenders, filling borrowers in team order from lenders in team order;
    both sides add up to the same total."""
    lenders = [n for n, gpus in lent.items() if gpus]
    left = dict(lent)  # what each lender has still to lend
    loans: dict[str, list[tuple[str, int]]] = {}
    k = 0
    for borrower, need in taken.items():
        while need and k < len(lenders):
            lender = lenders[k]
            gpus = min(need, left[lender])
            loans.setdefault(borrower, []).append((lender, gpus))
            need -= gpus
            left[lender] -= gpus
            if not left[lender]:
                k += 1
    return {n: tuple(pairs) for n, pairs in loans.items()}
