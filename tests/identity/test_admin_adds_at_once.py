"""An admin adds a person to a team at the moment that person's single sign-on login adds the same membership
(real PostgreSQL, a connection each): whichever comes second finds the first's membership. The admin is told
so on the page; nobody gets a 500 on the unique constraint, and neither waits for the other forever."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from tenants import identity
from tenants.group_map import parse_group_map
from tenants.identity import apply_groups
from tenants.models import AuditEntry, Membership
from tests.conftest import make_user
from tests.page_forms import opened
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)

GRANTS = parse_group_map("ml=maps:lead")
ALREADY = ("ada is already a lead of team maps (single sign-on or another admin may have just added them); "
           "nothing was saved")


def an_admin() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def until_another_waits_on_a_lock(done: threading.Event, timeout: float = 30) -> None:
    """Returns once another connection to this database waits on a lock (the admin's save, behind the
    login's transaction), or once `done` is set (it never had to wait)."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while not done.is_set() and time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # else it is read once per transaction
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'")  # fmt: skip
            if cursor.fetchone()[0]:
                return
            done.wait(0.02)


def pausing_the_login(monkeypatch, manager, method: str, admin_done: threading.Event) -> threading.Event:
    """Makes the login thread stop at `manager.method` until the admin's save waits on a lock behind it
    (or is over); returns the event set when the login got there."""
    real = getattr(manager, method)
    there = threading.Event()

    def paused(*args, **kwargs):
        if threading.current_thread().name == "log_in" and not there.is_set():
            there.set()
            until_another_waits_on_a_lock(admin_done)
        return real(*args, **kwargs)

    monkeypatch.setattr(manager, method, paused)
    return there


def test_an_admin_add_of_the_membership_a_login_is_making_is_refused_saying_so(maps, monkeypatch):
    """The login has added the membership but not yet committed when the admin saves the same one. Django's
    check of the add saw no membership, so the insert failed on the unique constraint: a 500."""
    ada, admin = make_user("ada"), an_admin()
    page = opened(admin, "/admin/tenants/membership/add/")
    admin_done = threading.Event()
    login_wrote = pausing_the_login(monkeypatch, identity.AuditEntry.objects, "create", admin_done)
    answers = []

    def log_in() -> None:
        apply_groups(ada, ["ml"], GRANTS)

    def add() -> None:
        try:
            assert login_wrote.wait(timeout=30)
            added = page | {"user": str(ada.pk), "team": str(maps.pk), "role": "member"}
            answers.append(admin.post("/admin/tenants/membership/add/", added))
        finally:
            admin_done.set()

    assert run_together(log_in, add, timeout=60) == []
    [answer] = answers
    assert answer.status_code == 200 and ALREADY in answer.content.decode()
    assert list(Membership.objects.filter(user=ada).values_list("team__slug", "role")) == [("maps", "lead")]
    assert list(AuditEntry.objects.values_list("summary", flat=True)) == [
        "Single sign-on for ada: joined maps as lead."]


def test_a_team_page_adding_a_person_whose_login_adds_them_at_once_waits_and_is_refused(maps, monkeypatch):
    """The login has read the person's memberships (none in maps) and is about to add one when the team page
    is saved with that person added. The page's add went through, and the login's insert then failed on the
    unique constraint: the login got a 500. The page now waits for the person's row, which the login holds;
    and since the page holds the team's row only against other writes of the team, not against a row that
    merely names it, the login's insert does not wait for the page: neither waits for the other forever."""
    ada, admin = make_user("ada"), an_admin()
    url = f"/admin/tenants/team/{maps.pk}/change/"
    page = opened(admin, url)
    added = int(page["memberships-TOTAL_FORMS"])
    page |= {"memberships-TOTAL_FORMS": str(added + 1), f"memberships-{added}-user": str(ada.pk),
             f"memberships-{added}-role": "member", f"memberships-{added}-team": str(maps.pk)}  # fmt: skip
    admin_done = threading.Event()
    login_locked = pausing_the_login(monkeypatch, identity.Membership.objects, "create", admin_done)
    answers = []

    def log_in() -> None:
        apply_groups(ada, ["ml"], GRANTS)

    def save_team() -> None:
        try:
            assert login_locked.wait(timeout=30)
            answers.append(admin.post(url, page))
        finally:
            admin_done.set()

    assert run_together(log_in, save_team, timeout=60) == []
    [answer] = answers
    assert answer.status_code == 200 and ALREADY in answer.content.decode()
    assert list(Membership.objects.filter(user=ada).values_list("team__slug", "role")) == [("maps", "lead")]


def test_an_admin_add_that_comes_first_stands_and_the_login_finds_it(maps, monkeypatch):
    """The admin's add is checked and saved first; the login waits for it and changes only the role."""
    ada, admin = make_user("ada"), an_admin()
    page = opened(admin, "/admin/tenants/membership/add/")
    response = admin.post("/admin/tenants/membership/add/",
                          page | {"user": str(ada.pk), "team": str(maps.pk), "role": "member"})  # fmt: skip
    assert response.status_code == 302
    assert apply_groups(ada, ["ml"], GRANTS) == ["now lead of maps"]
    assert list(Membership.objects.filter(user=ada).values_list("team__slug", "role")) == [("maps", "lead")]
