"""Reads on jobs, scoped to what a user may see. Pages and the API both use these."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from jobs.models import Job
from tenants.permissions import is_admin


def jobs_for(user) -> QuerySet[Job]:
    """The jobs a user may see: every job for staff, else their teams' jobs."""
    jobs = Job.objects.select_related("team", "tier", "owner")
    if is_admin(user):
        return jobs
    return jobs.filter(team__memberships__user=user)


def jobs_of_team(team) -> QuerySet[Job]:
    """Every job of one team: what a team's API token sees."""
    return Job.objects.select_related("team", "tier", "owner").filter(team=team)


def get_job_for_user(user, job_id: int) -> Job:
    """The job, or Http404 when it does not exist or belongs to a team the user is not in.

    Another team's job answers 404, never 403: its existence is not revealed.
    """
    job = jobs_for(user).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


def queue_for(user) -> QuerySet[Job]:
    """Waiting jobs the user may see, in queue order (global position, then R3 order for unranked ones)."""
    return in_queue_order(jobs_for(user))


def in_queue_order(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The waiting jobs among `jobs`, in queue order."""
    return jobs.filter(state=Job.State.QUEUED).order_by("position", "-tier__value", "queued_at", "id")
