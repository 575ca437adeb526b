"""Victim searches proven hopeless, remembered while the proof holds (R8).

A search for a job that fits neither as things are nor around reservations
is keyed by what it depends on besides the state: (team, tier value,
preemptible, shape, and, for a job that may use reserved room, the end its
`max_runtime` is sure of). Within one cycle two kinds of answer are kept:

- *for now*: any search that found nothing. It stays true until a
  preemption frees room and quota (then everything is forgotten), or an
  admission leaves a team above its nominal (then the answers that counted
  reclaim candidates are forgotten, as below).
- *lasting*: the search's upper bound (every job that could become a victim,
  all gone at once) has no candidates, or leaves the job without room on
  the cluster's free room (`Bound.lasting`). Such a proof survives a
  preemption by team X with victims of teams Y when the job's team is
  neither X nor one of Y and X ends within its nominal in every resource:
  - room only shrinks: X takes room, and the room its victims freed beyond
    what their nodes had free before serves only X (`State.reserve`);
  - the bound only shrinks: the job's team keeps its usage and its own
    candidates; the teams Y lose usage and jobs, so fewer of theirs are
    above nominal or reachable in R8 order; X, within nominal, offers no
    reclaim candidates; every other team is as it was;
  - with less room and fewer candidates the bound still finds no
    candidates, or still leaves no room (a free total short of the job, or
    a gang of one group, placed exactly when the nodes hold enough
    replicas); quota does not enter either proof.
  An admission without victims also keeps room and candidates shrinking,
  except that a team above its nominal after it may offer more reclaim
  candidates: its jobs are reachable in R8 order while it stays above
  nominal with the earlier ones gone, so every GPU it borrows more reaches
  further, whether it only started borrowing or borrowed already. Then the
  answers, for now and lasting, of other teams' searches that counted
  reclaim candidates are forgotten. A search whose team could not reclaim even
  with all its own candidates gone (`Verdict.reclaims` False) counted
  none, and none appears while that team's usage does not drop, which
  takes a preemption involving it; so its answer outlives every other
  team's borrowing. The admitting team's own answers stand too: its jobs
  are never its own reclaim candidates, and the job it admitted is never a
  victim in this cycle.

A lasting proof also covers a larger gang of one replica group: same team,
tier value, preemptibility and GPU type, asking for the same resources, at
least as many replicas, each at least as large. Its bound counts the same
candidates (its own team's depend on the tier value; other teams' on the
resources it needs and on its being one group), or none of other teams when
the larger need keeps its team from ending within nominal (R6); and with
the same or less room given back, nodes hold fewer of its larger replicas
than the smaller gang needed, and its free total is shorter.

A job whose key is remembered, or covered, would find nothing: the cycle
skips its search, and its decisions are those of a cycle that ran every
search.
"""

from __future__ import annotations

from .demand import Demand
from .preemption import Verdict


def _family(lasting_key: tuple) -> tuple:
    """Returns what a lasting proof must share with another key to cover
    it: all of it, but the shape of a gang of one replica group, of which
    only the resources it asks for."""
    value, preemptible, demand, kind = lasting_key
    if len(demand.groups) != 1:
        return lasting_key
    return (value, preemptible, kind, demand.needs())


def _covers(proven: Demand, demand: Demand) -> bool:
    """Returns whether a gang of one group `demand` is at least `proven`:
    as many replicas or more, each as large or larger."""
    a, b = proven.groups[0], demand.groups[0]
    return a[0] <= b[0] and a[1] <= b[1] and a[2] <= b[2] and a[3] <= b[3]


class Hopeless:
    """The searches of one cycle known to find nothing."""

    def __init__(self) -> None:
        # key -> (its team, whether its bound counted reclaim candidates)
        self.for_now: dict[tuple, tuple[str, bool]] = {}
        # team -> family of the lasting key of each of its proofs (the key
        # without the sure end: a lasting proof is made on all room, which
        # does not depend on it; see `_family`) -> its demand -> whether the
        # proof counted reclaim candidates.
        self.lasting: dict[str, dict[tuple, dict[Demand, bool]]] = {}

    def known(self, key: tuple, lasting_key: tuple, team: str) -> bool:
        """Returns whether a search with these keys is known to find nothing."""
        if key in self.for_now:
            return True
        proofs = self.lasting.get(team)
        if proofs is None:
            return False
        family = proofs.get(_family(lasting_key))
        if not family:
            return False
        demand = lasting_key[2]
        if demand in family:
            return True
        return len(demand.groups) == 1 and any(_covers(d, demand) for d in family)

    def note(self, key: tuple, lasting_key: tuple, team: str, verdict: Verdict) -> None:
        """Remembers a search that found nothing, with its bound's verdict."""
        self.for_now[key] = (team, verdict.reclaims)
        if verdict.lasting:
            family = self.lasting.setdefault(team, {}).setdefault(_family(lasting_key), {})
            family[lasting_key[2]] = verdict.reclaims

    def admitted(self, team: str, borrowing: bool) -> None:
        """Forgets what an admission without victims by `team` may have made
        possible; `borrowing` tells whether the team is above its nominal
        (in some resource, of any GPU type) after it."""
        if not borrowing:
            return
        self.for_now = {key: (owner, reclaims) for key, (owner, reclaims) in self.for_now.items()
                        if owner == team or not reclaims}
        self._forget_reclaims(but=team)

    def preempted(self, team: str, victim_teams: set[str | None], borrowing: bool) -> None:
        """Forgets what a preemption by `team` (its job admitted, its victims
        gone) may have made possible; `borrowing` tells whether the team is
        above its nominal after it."""
        self.for_now.clear()
        self.lasting.pop(team, None)
        for other in victim_teams:
            if other is not None:
                self.lasting.pop(other, None)
        if borrowing:
            self._forget_reclaims(but=team)

    def _forget_reclaims(self, but: str) -> None:
        """Forgets the lasting proofs that counted reclaim candidates, but
        those of team `but`, whose own jobs are never its reclaim candidates."""
        for team, proofs in self.lasting.items():
            if team == but:
                continue
            for family, of_family in proofs.items():
                if any(of_family.values()):
                    proofs[family] = {d: r for d, r in of_family.items() if not r}
