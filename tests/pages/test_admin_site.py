"""The admin site is named for Gangway in its header and its pages' titles, as the portal's pages are."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_admin_s_pages_carry_gangway_s_name(login, staff):
    staff.is_superuser = True
    staff.save()
    body = login(staff).get("/admin/").content.decode()
    assert "<title>Site administration | Gangway admin</title>" in body
    assert "Gangway administration" in body and "Django administration" not in body
    team_list = login(staff).get("/admin/tenants/team/").content.decode()
    assert "| Gangway admin</title>" in team_list
