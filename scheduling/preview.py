"""What would happen to a job if it were submitted now: the same policy as admission.

Used by the submission service (R10: refuse what can never fit) and by the
submit form's live fit preview. Nodes come from the last cycle's reading of
the cluster (ClusterNode), so no preview ever calls the cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone as dt_timezone

from django.conf import settings
from django.utils import timezone

from jobs.models import Job
from jobs.spec import JobSpec
from portal.compiled import CompiledQuery
from scheduling.cluster.base import NodeInfo, OutsidePod, TypeLabel
from scheduling.models import ClusterNode
from scheduling.policy import plan as make_plan
from scheduling.records import readable_reason
from scheduling.policy.model import RESOURCES, PendingJob, Rejection, Snapshot, Team as PolicyTeam, Tier as PolicyTier
from scheduling.policy.reasons import amount
from scheduling.policy.state import State
from scheduling.policy.types import type_of_key
from scheduling.gpu_types import known_types
from scheduling.selectors import live_version
from scheduling.snapshot import (
    build_world, epoch, policy_nodes, policy_replicas, policy_settings, policy_teams, replica_defaults,
)
from tenants.limit_words import UNSET, limit_text
from tenants.models import PriorityTier, Team

# Not of digits alone, so R3 puts it after the jobs queued in the same second (`id_order`): it is the newest.
PREVIEW_ID = "preview"


@dataclass(frozen=True)
class Preview:
    outcome: str  # "starts_now" | "waits" | "never" | "unknown"
    message: str
    position: int | None = None
    eta: datetime | None = None
    code: str = ""


def _known_nodes(known: tuple[TypeLabel, ...] | None = None) -> tuple[list[NodeInfo], list[OutsidePod]]:
    """The nodes the last cycle read, each labelled with the GPU type it found there (so the
    snapshot's matching of labels to types, `gpu_types.type_of`, finds the same type again).
    `known` are the cluster's GPU types when the caller has read them already (R10 counts queries)."""
    rows = _NODES()
    types = {t.name: t for t in (known_types() if known is None else known)}
    nodes = [NodeInfo(name=name, gpu=gpu, cpu=cpu, memory=memory,
                      labels=((types[kind].label, types[kind].value),) if kind in types else (), unschedulable=why)
             for name, gpu, cpu, memory, *_, kind, why in rows]  # fmt: skip
    outside = [
        OutsidePod(namespace="", name=f"outside-{name}", node=name, gpu=gpu, cpu=cpu, memory=memory)
        for name, _, _, _, gpu, cpu, memory, _, _ in rows
        if gpu or cpu or memory
    ]
    return nodes, outside


# Read on every submission (R10): the SQL is built once, the rows are read fresh each time.
_NODES = CompiledQuery(
    lambda: ClusterNode.objects.values_list(
        "name", "gpu", "cpu", "memory", "outside_gpu", "outside_cpu", "outside_memory", "gpu_type", "unschedulable"
    )
)


def _pending(team: str, spec: JobSpec, tier: PriorityTier, now: datetime, defaults: dict[str, int]) -> PendingJob:
    """The job as the policy sees it; `defaults` are its team's replica defaults."""
    groups = [{"count": g.count, "gpu": g.gpu, "cpu": g.cpu, "memory": g.memory} for g in spec.replicas]
    return PendingJob(id=PREVIEW_ID, team=team, tier=tier.name, queued=epoch(now),
                      replicas=policy_replicas(groups, defaults), max_runtime=spec.max_runtime,
                      gpu_type=tuple(spec.gpu_type))  # fmt: skip


def rejection_for(*, team: Team, spec: JobSpec, tier: PriorityTier) -> Rejection | None:
    """The policy's R10 refusal of this job on an empty cluster, or None when it could fit some day.

    Returns None too while no cycle has read the cluster's nodes yet: the first
    cycle rejects then, with the same sentence.
    """
    types = known_types()
    nodes, _ = _known_nodes(types)
    if not nodes:
        return None
    now = timezone.now()
    # The empty cluster: nodes and quotas only. No job is read, so a
    # submission costs the same with 10 or 10,000 jobs in the queue. Every
    # query here is read fresh: R10 never answers from stale quotas.
    teams = policy_teams()
    _, defaults = teams[team.slug]
    # The policy looks a tier up only for the jobs in the snapshot, and the
    # only job here is this one: its own tier is all it needs.
    only_tier = (PolicyTier(name=tier.name, value=tier.value, preemptible=tier.preemptible),)
    snapshot = Snapshot(
        now=epoch(now), nodes=policy_nodes(nodes, types), gpu_types=tuple(t.name for t in types),
        tiers=only_tier, teams=tuple(policy_team for policy_team, _ in teams.values()),
        running=(), pending=(_pending(team.slug, spec, tier, now, defaults),), settings=policy_settings(),
    )  # fmt: skip
    result = make_plan(snapshot, with_eta=False, with_waits=False)  # only the rejections are read
    return next((r for r in result.reject if r.id == PREVIEW_ID), None)


@dataclass(frozen=True)
class _Shared:
    """The snapshot fit previews plan against, with each job's team, as of `now`: what `version` names."""

    version: tuple
    until: float  # time.monotonic() past which it is read again
    now: datetime
    snapshot: Snapshot
    teams_of: dict[str, str]
    plans: dict = field(default_factory=dict)  # plans of the snapshot as it is, by how they were made

    def plan_as_is(self):
        """The snapshot's plan without estimated starts, made once per reading (quota what-ifs compare with it)."""
        made = self.plans.get("as_is")
        if made is None:
            made = self.plans["as_is"] = make_plan(self.snapshot, with_eta=False)
        return made


_shared: _Shared | None = None


def _preview_world() -> _Shared:
    """The snapshot of now for fit previews and quota what-ifs (with no nodes before any cycle read the
    cluster's), read again once a page would show something new (`live_version`: a decision, a job's move, a
    quota) or once FIT_PREVIEW_REUSE seconds have passed, and shared by the previews of this process meanwhile:
    reading a busy queue took seconds, at each pause in the typing of everyone on the submit form."""
    global _shared
    version = live_version()
    held = _shared  # one reference, read and replaced whole: no lock, and none held while a reading is made
    if held is not None and held.version == version and time.monotonic() < held.until:
        return held
    # Previews needing a new reading at once each make one, as they would without sharing, rather than wait in turn.
    nodes, outside = _known_nodes()
    now = timezone.now()
    world = build_world(now=now, nodes=nodes, outside=outside)
    teams_of = {job_id: job.team.slug for job_id, job in world.jobs.items()}
    held = _Shared(version, time.monotonic() + settings.FIT_PREVIEW_REUSE, now, world.snapshot, teams_of)
    if settings.FIT_PREVIEW_REUSE:
        _shared = held
    return held


def fit_preview(*, team: Team, spec: JobSpec, tier: PriorityTier) -> Preview:
    """Where the job would stand if submitted now: starts now, waits (position, ETA), or never fits. It is
    planned into the snapshot of now, as the submission's first cycle would plan it (`_preview_world`)."""
    world = _preview_world()
    if not world.snapshot.nodes:
        return Preview("unknown", "No cluster reading yet; the first admission cycle will place it.")
    now = world.now
    pending = _pending(team.slug, spec, tier, now, replica_defaults(team))
    result = make_plan(replace(world.snapshot, pending=(*world.snapshot.pending, pending)))
    for admission in result.admit:
        if admission.id == PREVIEW_ID:
            where = ", ".join(node for node, _ in admission.placement)
            if admission.gpu_type:  # the type it would get, before the nodes: what a submitter chose
                where = f"{admission.gpu_type} GPUs ({where})"
            if admission.victims:
                return Preview("starts_now", f"Starts after preempting {len(admission.victims)} job(s), on {where}.")
            return Preview("starts_now", f"Starts now on {where}.")
    for rejection in result.reject:
        if rejection.id == PREVIEW_ID:
            return Preview("never", f"Can never run: {rejection.reason}", code=rejection.code)
    for wait in result.wait:
        if wait.id == PREVIEW_ID:
            eta = datetime.fromtimestamp(wait.eta, tz=dt_timezone.utc) if wait.eta is not None else None
            # As its page will say it: clock times, durations, and another team's job by its team only.
            reason = readable_reason(wait.reason, team=team.slug, teams_of=world.teams_of, now=now)
            return Preview("waits", reason, position=wait.position, eta=eta, code=wait.code)
    return Preview("unknown", "The policy gave no answer for this job.")


@dataclass(frozen=True)
class LimitChange:
    """One limit of one resource, before and after the change, as a person reads it ("8 GPUs", "no limit")."""

    resource: str
    limit: str  # "nominal", "borrowing limit", "lending limit"
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class QuotaWhatIf:
    """What a quota change would do right now, before it is saved."""

    preempted: list  # running jobs that would be preempted or reclaimed: (job, reason)
    starting: list  # queued jobs that would start
    rejected: list  # queued jobs that could then never fit: (job, reason)
    waiting: list = field(default_factory=list)  # the team's queued jobs that would keep waiting: (job, reason)
    others_waiting: int = 0  # queued jobs of other teams that would keep waiting
    limits: list = field(default_factory=list)  # LimitChange per resource and limit, the team's quota after the change
    warnings: list = field(default_factory=list)  # sentences: nominals past capacity, usage above a new limit

    @property
    def is_quiet(self) -> bool:
        return not (self.preempted or self.starting or self.rejected)


SHOWN_WAITING = 10
RESOURCE_WORDS = {"gpu": "GPU", "cpu": "CPU", "memory": "memory"}  # as a sentence names the policy's RESOURCES
NEEDS_WORDS = {"gpu": "GPUs", "cpu": "CPU", "memory": "memory"}  # what a job needs: "needs a100 GPUs"
LIMIT_NAMES = (("nominal", "nominal"), ("borrowing_limit", "borrowing limit"), ("lending_limit", "lending limit"))


def quota_what_if(*, team: Team, quotas: dict[str, dict]) -> QuotaWhatIf:
    """Plan the current snapshot with `team`'s quotas replaced by `quotas`; compare with the plan as is.

    `quotas` maps a resource to {"nominal", "borrowing_limit", "lending_limit"}
    (None = not set), or to None to remove its quota; a resource left out
    keeps its current row. Only the differences the change makes are
    returned as preemptions, starts and rejections; the team's jobs that
    would keep waiting, its limits before and after, and warnings come along.
    """
    world = _preview_world()
    now, snapshot, teams_of = world.now, world.snapshot, world.teams_of
    current = world.plan_as_is()
    before = next((t for t in snapshot.teams if t.name == team.slug), None)
    changed_teams = [_with_quotas(t, quotas) if t.name == team.slug else t for t in snapshot.teams]
    after = next((t for t in changed_teams if t.name == team.slug), None)
    proposed_snapshot = replace(snapshot, teams=tuple(changed_teams))
    proposed = make_plan(proposed_snapshot, with_eta=False)
    victims_now = {victim for admission in current.admit for victim in admission.victims}
    admitted_now = {admission.id for admission in current.admit}
    rejected_now = {rejection.id for rejection in current.reject}
    # The portal's jobs only (not outside usage), and of those only the ones the answer names are read.
    preempting = [(victim, admission.id) for admission in proposed.admit for victim in admission.victims
                  if victim not in victims_now and victim in teams_of]  # fmt: skip
    starting = [a.id for a in proposed.admit if a.id not in admitted_now and a.id in teams_of]
    rejected = [r for r in proposed.reject if r.id not in rejected_now and r.id in teams_of]
    waits = [w for w in proposed.wait if w.id in teams_of]
    own = [w for w in waits if teams_of[w.id] == team.slug]
    named = {*(i for pair in preempting for i in pair), *starting, *(r.id for r in rejected),
             *(w.id for w in own[:SHOWN_WAITING])}  # fmt: skip
    jobs = {str(pk): job for pk, job in Job.objects.select_related("team").in_bulk([int(i) for i in named]).items()}

    def readable(job_id: str, reason: str) -> str:  # as the job's page says it: clock times, "#12" for its team's jobs
        return readable_reason(reason, team=teams_of[job_id], teams_of=teams_of, now=now)

    return QuotaWhatIf(  # a job deleted since the reading is left out
        preempted=[(jobs[victim], f"to make room for {jobs[by].name} (#{by})") for victim, by in preempting
                   if victim in jobs and by in jobs],
        starting=[jobs[i] for i in starting if i in jobs],
        rejected=[(jobs[r.id], readable(r.id, r.reason)) for r in rejected if r.id in jobs],
        waiting=[(jobs[w.id], readable(w.id, w.reason)) for w in own[:SHOWN_WAITING] if w.id in jobs],
        others_waiting=len(waits) - len(own),
        limits=_limit_changes(before, after, snapshot.gpu_types) if before and after else [],
        warnings=_warnings(proposed_snapshot, team.slug),
    )  # fmt: skip


def _with_quotas(policy_team, quotas: dict[str, dict]):
    """The policy's team with `quotas` put in place of its own (None removes a resource's quota)."""
    nominal, borrowing, lending = dict(policy_team.nominal), dict(policy_team.borrowing_limit), dict(policy_team.lending_limit)
    for resource, values in quotas.items():
        if values is None:  # the quota is removed: limited by node capacity only
            for target in (nominal, borrowing, lending):
                target.pop(resource, None)
            continue
        nominal[resource] = values["nominal"]
        for target, key in ((borrowing, "borrowing_limit"), (lending, "lending_limit")):
            target.pop(resource, None)
            if values.get(key) is not None:
                target[resource] = values[key]
    return PolicyTeam(name=policy_team.name, nominal=nominal, borrowing_limit=borrowing, lending_limit=lending,
                      weight=policy_team.weight, per_replica_max=policy_team.per_replica_max)  # fmt: skip


def _words(resource: str) -> str:
    """A quota resource as a sentence names it: "GPU", "a100 GPU", "CPU", "memory"."""
    gpu_type = type_of_key(resource)
    return f"{gpu_type} GPU" if gpu_type is not None else RESOURCE_WORDS[resource]


def _index(resource: str) -> int:
    """The policy's index of the resource a quota key counts (a GPU type's counts GPUs)."""
    return 0 if type_of_key(resource) is not None else RESOURCES.index(resource)


def _limit_text(team, resource: str, key: str) -> str:
    """One limit as the policy reads it, a limit not set in the words every page uses (`tenants.limit_words`): a
    missing borrowing limit is "no limit", a missing lending limit lends "all unused"."""
    if resource not in team.nominal:
        return UNSET["nominal"]
    limits = {"nominal": team.nominal, "borrowing_limit": team.borrowing_limit, "lending_limit": team.lending_limit}[key]
    return limit_text(key, limits.get(resource), lambda figure: amount(_index(resource), figure))


def _limit_changes(before, after, gpu_types: tuple[str, ...]) -> list[LimitChange]:
    """Every limit of every resource either side names, before and after: GPUs first (each GPU
    type in the cluster's order), then CPU and memory."""
    named = set(before.nominal) | set(after.nominal)

    def order(resource: str) -> tuple:
        gpu_type = type_of_key(resource)
        rank = gpu_types.index(gpu_type) if gpu_type in gpu_types else len(gpu_types)
        return _index(resource), rank, resource

    return [LimitChange(_words(resource), words, _limit_text(before, resource, key), _limit_text(after, resource, key))
            for resource in sorted(named, key=order) for key, words in LIMIT_NAMES]  # fmt: skip


def _warnings(snapshot: Snapshot, slug: str) -> list[str]:
    """What the new quotas promise that the cluster cannot keep, read from the policy's own quota state.

    - nominals that add up to more than the cluster has (guarantees past capacity): with GPU
      types, each type's GPU nominals against that type's GPUs;
    - the team using more now than its new ceiling (nominal + borrowing limit): its
      running jobs keep running, and it starts nothing that needs that resource until
      it is back under.
    """
    state = State(snapshot)
    nodes = [n for n in snapshot.nodes if n.schedulable]  # the capacity R2 shares out, as the quotas' own
    if state.types is None:
        quotas = [(state.quota, "", (sum(n.gpu for n in nodes),), range(len(RESOURCES)))]
    else:  # each type's quota carries its GPUs; CPU and memory are the same in all, read from the first
        quotas = [(quota, f"{name} ", (capacity[0],), (0,))
                  for quota, name, capacity in zip(state.quotas, state.types.names, state.types.capacity)]
        quotas.append((state.quotas[0], "", (), (1, 2)))
    capacity = {1: sum(n.cpu for n in nodes), 2: sum(n.memory for n in nodes)}
    warnings = []
    for quota, kind, gpus, indices in quotas:
        for r in indices:
            what = kind + RESOURCE_WORDS[RESOURCES[r]]  # "a100 GPU quotas"
            needs = kind + NEEDS_WORDS[RESOURCES[r]]  # "starts nothing that needs a100 GPUs"

            def show(value: int) -> str:  # "8 a100 GPUs" for a type's GPUs, "8 GPUs" or "64 cores" else
                return amount(r, value).replace(" GPU", f" {kind}GPU", 1)

            total = gpus[0] if r == 0 else capacity[r]
            assigned = sum(quota.nominal[name][r] for name in quota.named if r in quota.named[name])
            if assigned > total:
                warnings.append(f"Nominal {what} quotas would add up to {show(assigned)}, more than the cluster's "
                                f"{show(total)}: not every team can get its guaranteed share at once.")  # fmt: skip
            if slug in quota.usage and r in quota.named[slug]:
                ceiling, used = quota.ceiling[slug][r], quota.usage[slug][r]
                if ceiling is not None and used > ceiling:
                    nominal = quota.nominal[slug][r]
                    warnings.append(f"Team {slug} uses {show(used)} now, above its new limit of {show(ceiling)} "
                                    f"({show(nominal)} nominal + {show(ceiling - nominal)} borrowing): its running "
                                    f"jobs keep running, and it starts nothing more that needs {needs} until it is back under.")  # fmt: skip
    return warnings
