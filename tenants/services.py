"""Writes on teams and GPU types: quota changes, and GPU types added, changed and deleted, each
recorded with who made it and what it was before.

A cluster with no GPU type counts its GPUs as one resource, `gpu`; once it has
types, GPU quota is per type (`gpu:<type>`). The type services keep every team's
quota rows in step with that switch, so a team never holds a GPU quota the
policy cannot read.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from portal import triggers
from scheduling.policy.types import type_of_key
from tenants.audit import record, snapshot
from tenants.models import AuditEntry, GpuType, Quota, Resource, Team, is_quota_resource
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged, changes_since, figure_text, resource_text
from tenants.selectors import quota_resources

QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")


def quota_values(team: Team) -> dict[str, dict]:
    """The team's quotas as {resource: {nominal, borrowing_limit, lending_limit}}, plus its weight."""
    values = {q.resource: {f: getattr(q, f) for f in QUOTA_FIELDS} for q in team.quotas.all()}
    return {"weight": team.weight, **values}


def quota_update(*, team: Team, quotas: dict[str, dict], weight: float | None = None, actor=None,
                 based_on: QuotaAsRead | None = None) -> AuditEntry | None:
    """Save new quotas (and weight) for `team`; returns the audit entry, or None when nothing changed.

    `quotas` maps a resource to its three limits; a resource mapped to None
    loses its quota row (it is then limited by node capacity only).

    `based_on` is what the edit started from (the figures the quota page was loaded with, or an API
    client read). When the stored figures differ from them, another admin changed the quota since and
    saving would undo that: QuotaChanged, naming the changes, and nothing is saved. The comparison is
    made under the team's row lock, which every quota write takes, so no change slips in between.
    """
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=team.pk)
        before = quota_values(team)
        if based_on is not None and (changes := changes_since(team, based_on, before)):
            raise QuotaChanged(changes, _changes(based_on.figures, _applied(based_on.figures, quotas, weight)))
        known = quota_resources()
        for resource, values in quotas.items():
            if values is None and is_quota_resource(resource):  # a row left from before types may go too
                Quota.objects.filter(team=team, resource=resource).delete()
                continue
            if resource not in known or values is None:
                raise ValueError(f"Unknown resource {resource!r}; the resources are {', '.join(known)}.")
            limits = {f: values.get(f) for f in QUOTA_FIELDS}
            if not Quota.objects.filter(team=team, resource=resource).update(**limits):
                Quota.objects.create(team=team, resource=resource, **limits, **_per_replica_gpu(team, resource))
        if weight is not None and weight != team.weight:
            team.weight = weight
            team.save(update_fields=["weight"])
        after = quota_values(team)
        if after == before:
            return None
        entry = AuditEntry.objects.create(actor=actor, team=team, subject="quota", before=before, after=after,
                                          summary=_describe(team, before, after))  # fmt: skip
        transaction.on_commit(admission_inputs_changed)
    return entry


def _applied(figures: dict, quotas: dict[str, dict | None], weight: float | None) -> dict:
    """`figures` (in `quota_values`' shape) with an edit applied: what the editor meant them to become."""
    after = {key: value for key, value in figures.items() if key not in quotas}
    after |= {resource: {f: values.get(f) for f in QUOTA_FIELDS} for resource, values in quotas.items()
              if values is not None}
    if weight is not None:
        after["weight"] = weight
    return after


def _per_replica_gpu(team: Team, resource: str) -> dict:
    """The per-replica GPU limits a new `gpu:<type>` row starts with: the team's figure from its other
    GPU rows, since a replica's GPU limit is one figure for all its types (a LimitRange limits
    nvidia.com/gpu per pod whatever the model, and R10 reads it so); {} for other resources."""
    if type_of_key(resource) is None:
        return {}
    rows = team.quotas.filter(resource__startswith="gpu").exclude(resource=resource)
    limits = [m for m in rows.values_list("max_per_replica", flat=True) if m is not None]
    return {"max_per_replica": min(limits)} if limits else {}


def _describe(team: Team, before: dict, after: dict) -> str:
    return f"Quota of team {team.slug}: " + "; ".join(_changes(before, after)) + "."


def _changes(before: dict, after: dict) -> list[str]:
    """Each figure that differs, as the audit words it, in the refusal's words and units (`figure_text`):
    "gpu nominal 8 GPUs -> 4 GPUs", "l4 GPUs nominal 4 GPUs -> 2 GPUs", "cpu nominal no quota -> 64 CPUs",
    "weight 1.0 -> 2.0"."""
    parts = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key == "weight":
            parts.append(f"weight {old} -> {new}")
            continue
        for field in QUOTA_FIELDS:
            a, b = (old or {}).get(field), (new or {}).get(field)
            if a != b:
                words = field.replace("_", " ")
                parts.append(f"{resource_text(key)} {words} {figure_text(key, field, a)} -> {figure_text(key, field, b)}")
    return parts


def admission_inputs_changed() -> None:
    """Asks for an admission cycle and a tenant sync now, after a change to
    what admission reads (quotas, weights, tiers), instead of at the next beat."""
    triggers.trigger(triggers.ADMISSION_CYCLE)
    triggers.trigger(triggers.SYNC_TENANTS)


# --- GPU types -------------------------------------------------------------------
class GpuTypeRefused(ValueError):
    """A change of GPU types that would leave a quota or a job naming a type the cluster lacks."""


# Who outside this app names a GPU type: tenants sits below jobs, so the scheduling app names the
# function once the models have loaded (scheduling.apps), as it does for the R10 judge.
TypeUsers = Callable[[str], list[int]]
_type_users: dict[str, TypeUsers] = {}
JOBS_NAMED = 5  # a refusal names the first few jobs by id


def find_gpu_type_users_with(finder: TypeUsers) -> None:
    """Names the function that, called with a type's name, returns the ids of the queued or running
    jobs that ask for it or run on it (empty when none does)."""
    _type_users["jobs"] = finder


def _jobs_naming(name: str) -> str:
    """The queued or running jobs that name type `name`, as a phrase ("2 queued or running jobs (#4, #7)");
    "" when none does."""
    try:
        finder = _type_users["jobs"]
    except KeyError:
        raise ImproperlyConfigured("No GPU type users finder: the scheduling app must be in INSTALLED_APPS.") from None
    ids = sorted(finder(name))
    if not ids:
        return ""
    shown = ", ".join(f"#{pk}" for pk in ids[:JOBS_NAMED]) + (", ..." if len(ids) > JOBS_NAMED else "")
    return f"{len(ids)} queued or running job{'s' if len(ids) > 1 else ''} ({shown})"


def gpu_type_create(*, actor=None, **fields) -> GpuType:
    """Adds a GPU type and returns it; ValidationError for bad fields.

    The first type turns every team's `gpu` quota into that type's (`gpu:<name>`), limits
    and per-replica figures unchanged, in the same transaction: a cluster with one type
    behaves as it did without.
    """
    with transaction.atomic():
        lock_teams()
        first = not GpuType.objects.exists()
        gpu_type = GpuType(**fields)
        gpu_type.full_clean()
        gpu_type.save()
        record(actor=actor, obj=gpu_type, before={}, after=snapshot(gpu_type), verb="added")
        if first:
            _retype_quotas(Resource.GPU, gpu_type.resource, actor,
                           f"the cluster's first GPU type, {gpu_type.name}, was added")  # fmt: skip
        transaction.on_commit(admission_inputs_changed)
    return gpu_type


def gpu_type_update(*, gpu_type: GpuType, actor=None, **fields) -> GpuType:
    """Changes a GPU type's fields and returns it; ValidationError for bad fields.

    A new name renames the teams' quota rows of the type with it; it is refused
    (GpuTypeRefused) while queued or running jobs name the type, since what a job asked
    for and the type it runs on are its own record, which a rename would change under it.
    """
    with transaction.atomic():
        lock_teams()
        current = GpuType.objects.select_for_update().get(pk=gpu_type.pk)
        before, old = snapshot(current), current.resource
        for key, value in fields.items():
            setattr(current, key, value)
        if current.resource != old:
            problem = gpu_type_rename_problem(gpu_type, current.name)
            if problem:
                raise GpuTypeRefused(problem)
        current.full_clean()
        current.save()
        record(actor=actor, obj=current, before=before, after=snapshot(current), verb="changed")
        if current.resource != old:
            _retype_quotas(old, current.resource, actor, f"GPU type {type_of_key(old)} was renamed {current.name}")
        transaction.on_commit(admission_inputs_changed)
    return current


def gpu_type_delete(*, gpu_type: GpuType, actor=None) -> None:
    """Deletes a GPU type; GpuTypeRefused, with nothing changed, when quotas or jobs still name it.

    Deleting the last type turns the teams' quotas of it back into `gpu`: the cluster's
    GPUs are of one kind again.
    """
    with transaction.atomic():
        lock_teams()
        current = GpuType.objects.select_for_update().filter(pk=gpu_type.pk).first()
        if current is None:
            return
        problem = gpu_type_delete_problem(current)
        if problem:
            raise GpuTypeRefused(problem)
        if not GpuType.objects.exclude(pk=current.pk).exists():
            _retype_quotas(current.resource, Resource.GPU, actor,
                           f"the cluster's last GPU type, {current.name}, was deleted")  # fmt: skip
        record(actor=actor, obj=current, before=snapshot(current), after={}, verb="deleted")
        current.delete()
        transaction.on_commit(admission_inputs_changed)


def gpu_type_rename_problem(gpu_type: GpuType, name: str) -> str:
    """Why `gpu_type` cannot be renamed `name` now ("" when it can): queued or running jobs name it."""
    if name == gpu_type.name:
        return ""
    jobs = _jobs_naming(gpu_type.name)
    if not jobs:
        return ""
    return (f"GPU type {gpu_type.name} cannot be renamed {name} while {jobs} ask for it or run on it; "
            "rename it once they have ended.")  # fmt: skip


def gpu_type_delete_problem(gpu_type: GpuType) -> str:
    """Why `gpu_type` cannot be deleted now ("" when it can): teams' quotas (unless it is the last
    type, whose quotas become `gpu` again) or queued or running jobs name it."""
    named = []
    last = not GpuType.objects.exclude(pk=gpu_type.pk).exists()
    teams = list(Quota.objects.filter(resource=gpu_type.resource).order_by("team__slug").values_list("team__slug", flat=True))
    if teams and not last:
        named.append(f"the {gpu_type.resource} quota of team{'s' if len(teams) > 1 else ''} {_listed(teams)}")
    jobs = _jobs_naming(gpu_type.name)
    if jobs:
        named.append(jobs)
    if named:
        return (f"GPU type {gpu_type.name} cannot be deleted while {' and '.join(named)} name it; "
                "remove those quotas on the teams' quota pages and let those jobs end first.")  # fmt: skip
    return ""


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def lock_teams() -> None:
    """Locks every team row: type changes rewrite many teams' quotas, and a quota edit (which locks
    its team) or a second type change must not interleave with them. The GPU type admin takes it
    before it reads the type's row, so that it and the change lock in one order."""
    list(Team.objects.select_for_update().order_by("pk").values_list("pk", flat=True))


def _retype_quotas(old: str, new: str, actor, why: str) -> None:
    """Turns every team's quota row of resource `old` into one of `new`, each recorded in its team's
    history; GpuTypeRefused when a team has rows of both (neither could be kept whole)."""
    clashing = sorted(Team.objects.filter(quotas__resource=old).filter(quotas__resource=new)
                      .values_list("slug", flat=True))  # fmt: skip
    if clashing:
        raise GpuTypeRefused(f"Team{'s' if len(clashing) > 1 else ''} {_listed(clashing)} already "
                             f"{'have' if len(clashing) > 1 else 'has'} both a {old} and a {new} quota; "
                             f"remove one of them first.")  # fmt: skip
    for team in Team.objects.filter(quotas__resource=old).order_by("slug"):
        before = quota_values(team)
        Quota.objects.filter(team=team, resource=old).update(resource=new)
        AuditEntry.objects.create(actor=actor, team=team, subject="quota", before=before, after=quota_values(team),
                                  summary=f"Quota of team {team.slug}: its {old} quota became {new} ({why}).")  # fmt: skip
