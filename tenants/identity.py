"""Single sign-on with OpenID Connect, and the mapping of identity-provider groups to teams.

Switched on by setting OIDC_RP_CLIENT_ID (see the settings block "Identity").
At every SSO login the user's groups are read from the token's claims and
mapped to memberships and the staff flag, so the identity provider stays the
one place access is granted; memberships of teams the mapping does not name
are left as an admin set them.
"""

from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.http import Http404
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from tenants.group_map import STAFF, Grant, parse_group_map
from tenants.models import AuditEntry, Membership, Team

def apply_groups(user, groups: list[str], grants: dict[str, Grant]) -> list[str]:
    """Make the user's memberships and staff flag match their groups; returns what changed.

    Only teams some grant names are managed; a lead grant beats a member grant. The user's row is
    locked first and everything read after it, so two logins of one person at once (two tabs whose
    session ran out) are applied one after the other: the second finds the first's memberships and
    changes nothing, where both would have created them and one failed.
    """
    wanted: dict[str, str] = {}
    for group in groups:
        grant = grants.get(group)
        if grant and grant.role != STAFF and wanted.get(grant.team) != Membership.Role.LEAD:
            wanted[grant.team] = grant.role
    managed = {grant.team for grant in grants.values() if grant.role != STAFF}
    changes = []
    by_team: dict[Team, list[str]] = {}  # each team's history says what a login changed in it
    with transaction.atomic():
        # FOR NO KEY UPDATE: rows that merely reference the person (their jobs, events) are not held up.
        users = get_user_model().objects.select_for_update(no_key=True)
        user.is_staff = users.values_list("is_staff", flat=True).get(pk=user.pk)
        teams = {team.slug: team for team in Team.objects.filter(slug__in=managed)}
        current = {m.team.slug: m for m in Membership.objects.filter(user=user, team__slug__in=managed).select_related("team")}
        for slug, membership in current.items():
            if slug not in wanted:
                membership.delete()
                by_team.setdefault(membership.team, []).append(f"left {slug}")
        for slug, role in wanted.items():
            if slug not in teams:
                continue  # a mapped team that does not exist (yet) grants nothing
            membership = current.get(slug)
            if membership is None:
                Membership.objects.create(user=user, team=teams[slug], role=role)
                by_team.setdefault(teams[slug], []).append(f"joined {slug} as {role}")
            elif membership.role != role:
                membership.role = role
                membership.save(update_fields=["role"])
                by_team.setdefault(teams[slug], []).append(f"now {role} of {slug}")
        for team, changed in by_team.items():
            changes.extend(changed)
            _audit(user, groups, team, changed)
        if any(grant.role == STAFF for grant in grants.values()):
            staff = any(grants.get(group, Grant("", "")).role == STAFF for group in groups)
            if user.is_staff != staff:
                user.is_staff = staff
                user.save(update_fields=["is_staff"])
                changes.append("granted staff" if staff else "staff removed")
                _audit(user, groups, None, changes[-1:])
    return changes


def _audit(user, groups: list[str], team: Team | None, changes: list[str]) -> None:
    AuditEntry.objects.create(
        actor=None, team=team, subject="membership", before={}, after={"groups": sorted(groups)},
        summary=f"Single sign-on for {user.username}: " + "; ".join(changes) + ".",
    )  # fmt: skip


class GangwayOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's code flow, with users named from their claims and groups applied each login."""

    def get_user(self, user_id):
        """The signed-in user of a session, None once an admin deactivates the account (as Django's own
        backend answers): a person who left is signed out of the pages at their next request."""
        user = super().get_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("email") and claims.get("sub"))

    def get_username(self, claims) -> str:
        name = claims.get("preferred_username") or claims["email"].split("@")[0]
        return name[:150]

    def create_user(self, claims):
        """The new account, made for the claims; the account the same person's other login (another tab)
        made a moment before, when that one won the insert. A username another account holds (a local
        account with another e-mail address) refuses the login, saying so on the login page: accounts are
        never joined by name alone, which would hand that account to whoever the provider calls so."""
        username = self.get_username(claims)
        try:
            with transaction.atomic():
                user = super().create_user(claims)
        except IntegrityError:
            user = self.filter_users_by_claims(claims).filter(username=username).first()
            if user is None:
                messages.error(self.request, (
                    f"Single sign-on could not log you in: the username {username} belongs to another account "
                    f"(another e-mail address). An admin can set that account's e-mail address to "
                    f"{claims['email']} if it is yours."
                ))  # fmt: skip
                # mozilla-django-oidc takes this as a failed login and sends the person to the login page.
                raise SuspiciousOperation(f"username {username} is held by an account of another e-mail address")
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        user.first_name = str(claims.get("given_name", ""))[:150]
        user.last_name = str(claims.get("family_name", ""))[:150]
        user.save(update_fields=["first_name", "last_name"])
        groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        apply_groups(user, [str(group) for group in groups], parse_group_map(settings.OIDC_GROUP_MAP))
        return user


def oidc_enabled() -> bool:
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def when_sso_enabled(view):
    """404 for the SSO views on an install without single sign-on."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        return view(request, *args, **kwargs)

    return wrapper


def sso_context(request) -> dict:
    """Template context: whether the login page offers single sign-on."""
    return {"sso_enabled": oidc_enabled()}
