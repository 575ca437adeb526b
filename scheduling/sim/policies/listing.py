"""The running jobs a reduced snapshot lists as possible victims, in R8's
order (see reduced.py's docstring for which and why)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.policy import RunningJob, Tier

from ..engine import Entry


@dataclass(slots=True)
class Listing:
    """The running jobs a reduced snapshot lists, and their GPUs per node.

    `describe` returns entries as the snapshot lists them; `marks`, when given,
    the times the unsaved work of entries counts from (R8), else their
    starts are used."""

    since: int  # started at or before: past the thrash guard
    describe: Callable[[list[Entry]], list[RunningJob]]
    marks: Callable[[list[Entry]], list[int]] | None = None
    jobs: list[RunningJob] = field(default_factory=list)
    on_node: dict[int, int] = field(default_factory=dict)

    def team(self, running: dict[str, dict[str, Entry]], tier_gpus: dict[str, int],
             tiers: tuple[Tier, ...], above: int, own_below: int | None, *, bounded: bool) -> int:
        """Lists a team's jobs that may be victims in this pass; returns their GPUs.

        `running` is the team's running entries per tier in start order,
        `tier_gpus` their GPUs per tier, `tiers` the preemptible tiers, lowest
        first (R8). When `above` > 0 the team may be reclaimed from: its jobs
        in R8 order while the GPUs listed before them are fewer than `above`
        (all of them when not `bounded`). When a queued job of the team has
        tier value `own_below`, its jobs of lower tiers past the thrash guard.
        A tier listed whole is listed in start order: the order of the
        snapshot's running jobs changes no plan (the policy puts victims in
        R8 order itself).
        """
        gpus = before = 0
        for tier in tiers:
            group = running.get(tier.name)
            if not group:
                continue
            entries = list(group.values())
            cut = len(entries)
            if above > 0 and (not bounded or before + tier_gpus[tier.name] <= above):
                cut = 0
                listed = self._add(entries)
                gpus += listed
                before += listed
            elif above > 0 and before < above:
                if self.marks is None:
                    marks = [e.started for e in entries]  # start order already
                else:
                    # By mark, then start order: the sort is stable.
                    marks = self.marks(entries)
                    order = sorted(range(len(entries)), key=marks.__getitem__)
                    entries = [entries[k] for k in order]
                    marks = [marks[k] for k in order]
                # Least unsaved work first, one mark at a time, so that jobs
                # with the same mark (R8 orders them by id) go together.
                while cut and before < above:
                    second = marks[cut - 1]
                    while cut and marks[cut - 1] == second:
                        cut -= 1
                        before += entries[cut].gpus
                gpus += self._add(entries[cut:])
            if own_below is not None and tier.value < own_below:
                gpus += self._add([e for e in entries[:cut] if e.started <= self.since])
        return gpus

    def _add(self, entries: list[Entry]) -> int:
        self.jobs.extend(self.describe(entries))
        on_node = self.on_node
        gpus = 0
        for entry in entries:
            gpus += entry.gpus
            pods = entry.pods
            if len(pods) == 1:  # most jobs: one replica
                i = entry.nodes[0]
                on_node[i] = on_node.get(i, 0) + pods[0]
                continue
            for k, i in enumerate(entry.nodes):
                on_node[i] = on_node.get(i, 0) + pods[k]
        return gpus
