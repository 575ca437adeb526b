"""A team page locks every person its member rows name in one query, in id order, before any row is checked:
two team pages saved at once, each adding the person the other already lists, then take their locks in the
same order and one waits for the other, instead of each holding one person and waiting for the other's."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import make_user
from tests.page_forms import opened

USERS = get_user_model()._meta.db_table


def user_locks(queries) -> list[list[int]]:
    """The user ids each query locking user rows names (in id order: every one is ordered by the id it
    selects), in the order the queries ran."""
    locks = [query["sql"] for query in queries
             if f'FROM "{USERS}"' in query["sql"] and "FOR NO KEY UPDATE" in query["sql"]]  # fmt: skip
    assert all(re.search(rf'SELECT "{USERS}"."id" AS "pk" .* ORDER BY 1 ASC FOR NO KEY UPDATE$', sql) for sql in locks)
    return [sorted(int(pk) for pk in re.search(r"IN \(([\d, ]+)\)", sql)[1].split(", ")) for sql in locks]


def test_a_team_page_locks_all_its_members_in_id_order_before_checking_any(alice, maps):
    first, second = make_user("una"), make_user("two", teams=[maps])  # first has the lower id
    url = f"/admin/tenants/team/{maps.pk}/change/"
    page = opened(alice, url)
    added = int(page["memberships-TOTAL_FORMS"])
    page |= {"memberships-TOTAL_FORMS": str(added + 1), f"memberships-{added}-user": str(first.pk),
             f"memberships-{added}-role": "member", f"memberships-{added}-team": str(maps.pk)}  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        response = alice.post(url, page)
    assert response.status_code == 302
    locks = user_locks(queries.captured_queries)
    assert locks[0] == [first.pk, second.pk]  # one query for all, before the rows' own (`MembershipForm`)
    assert locks[1:] == [[second.pk], [first.pk]]  # each row re-locks its own person, in the page's order
    assert set(maps.memberships.values_list("user__username", flat=True)) == {"una", "two"}
