"""Who may do what: the one home of the rules pages, the API and templates apply.

- staff (admins) see every team and every job, and alone edit quotas;
- a team's members see the team, its jobs and usage, and submit jobs for it: one in no team submits none;
- a job is cancelled by its owner, a lead of its team, or staff;
- a team's API tokens and its webhook are managed by its leads and staff.

A team token (`TeamPrincipal`) is never staff and belongs to no membership:
the API scopes it to its own team before asking anything here.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from tenants.models import Membership, Team


def is_admin(user) -> bool:
    """Returns whether `user` is staff: sees every team and job, and the operators' banner."""
    return bool(getattr(user, "is_staff", False))


def is_lead(user, team_id: int) -> bool:
    """Returns whether `user` leads the team with primary key `team_id`."""
    return Membership.objects.filter(user=user, team=team_id, role=Membership.Role.LEAD).exists()


def visible_teams(user) -> QuerySet[Team]:
    """Returns the teams `user` may see and submit for: all for staff, else their own."""
    if is_admin(user):
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user)


def led_teams(user) -> QuerySet[Team]:
    """Returns the teams whose tokens and webhook `user` manages: those they lead, all for staff."""
    if is_admin(user):
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)


def viewers_of(team_id: int) -> Q:
    """Returns a filter on users: those who may see the team's jobs (its members, and staff)."""
    return Q(pk__in=Membership.objects.filter(team=team_id).values("user")) | Q(is_staff=True)


def can_view(user, team: Team) -> bool:
    """Returns whether `user` may see `team`'s jobs (their details, logs, env) and submit for it: a member,
    or staff. Every signed-in user reads any team's page (usage, quota, queue) without it."""
    return is_admin(user) or Membership.objects.filter(user=user, team=team).exists()


def can_submit(user, team: Team) -> bool:
    """Returns whether `user` may submit jobs for `team`: whoever may see it."""
    return can_view(user, team)


def can_submit_any(user) -> bool:
    """Returns whether `user` may submit jobs for some team: staff, or a member of one. Only an admin adds
    people to teams (the admin site, or the identity provider's groups under single sign-on)."""
    return is_admin(user) or Membership.objects.filter(user=user).exists()


def can_cancel(user, job) -> bool:
    """Returns whether `user` may cancel `job`: its owner, a lead of its team, or staff.

    Whether the job can still be stopped is the job's own (`Job.cancellable`).
    """
    return is_admin(user) or job.owner_id == user.pk or is_lead(user, job.team_id)


def can_cancel_now(user, job) -> bool:
    """Returns whether the page offers `user` to cancel `job`: allowed, and it can still stop."""
    return job.cancellable and can_cancel(user, job)


def can_manage_tokens(user, team: Team) -> bool:
    """Returns whether `user` creates and revokes `team`'s API tokens (and sets its webhook)."""
    return is_admin(user) or is_lead(user, team.pk)


def can_edit_quota(user) -> bool:
    """Returns whether `user` may change teams' quotas: staff only."""
    return is_admin(user)
