"""Two single sign-on logins of one person at the same moment (two tabs after the session ran out; real
PostgreSQL, two connections): both log in, and the groups make each membership once."""

from __future__ import annotations

import threading

import pytest

from tenants import identity
from tenants.group_map import parse_group_map
from tenants.models import AuditEntry, Membership
from tenants.identity import apply_groups
from tests.conftest import make_user
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_logins_at_once_make_each_membership_once(maps, vision, monkeypatch):
    user = make_user("ada")
    grants = parse_group_map("ml=maps:lead,cv=vision:member")
    read = identity.Membership.objects.filter
    both_read = threading.Barrier(2, timeout=5)

    def read_together(*args, **kwargs):
        found = read(*args, **kwargs)
        if kwargs.get("user") == user:
            try:
                both_read.wait(timeout=1)  # without the lock, both would find no membership before either writes
            except threading.BrokenBarrierError:
                pass  # the other login waits on the lock: it reads after this one commits
        return found

    monkeypatch.setattr(identity.Membership.objects, "filter", read_together)
    changed: list[list[str]] = []

    def log_in() -> None:
        changed.append(apply_groups(user, ["ml", "cv"], grants))

    assert run_together(log_in, log_in, timeout=30) == []
    assert sorted(Membership.objects.filter(user=user).values_list("team__slug", "role")) == [
        ("maps", "lead"), ("vision", "member")]
    assert sorted(len(changes) for changes in changed) == [0, 2]
    # One login's changes, an entry in each team's history; the other login changed nothing.
    assert sorted(AuditEntry.objects.filter(subject="membership").values_list("team__slug", flat=True)) == [
        "maps", "vision"]


def test_two_first_logins_at_once_make_one_account_and_both_log_in(maps, settings, monkeypatch):
    settings.OIDC_GROUP_MAP = "ml=maps:member"
    claims = {"sub": "a1", "email": "grace@example.com", "preferred_username": "grace", "groups": ["ml"]}
    backend = identity.GangwayOIDCBackend()
    monkeypatch.setattr(backend, "get_userinfo", lambda *args: dict(claims))
    find = backend.filter_users_by_claims
    both_looked = threading.Barrier(2, timeout=5)

    def find_together(found_claims):
        users = find(found_claims)
        if not users and not both_looked.broken:  # read now: neither finds the account, both go on to create it
            try:
                both_looked.wait(timeout=1)
            except threading.BrokenBarrierError:
                pass
        return users

    monkeypatch.setattr(backend, "filter_users_by_claims", find_together)
    users = []

    def log_in() -> None:
        users.append(backend.get_or_create_user("access", "id", {}))

    assert run_together(log_in, log_in, timeout=30) == []
    assert len(users) == 2 and users[0].pk == users[1].pk
    assert list(Membership.objects.filter(user=users[0]).values_list("team__slug", flat=True)) == ["maps"]
