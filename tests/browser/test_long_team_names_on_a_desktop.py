"""A team's slug may be 63 characters long. On a desktop (1366, 1280 and 1024 px wide) the tables that name a
job's team (the dashboard's queue, My jobs) or offer its notifications still fit their cards: the name wraps at its hyphens in its chip
rather than push the reason beside it out of sight; and the dashboard's bar of the team, too narrow for the
whole name, ends it with an ellipsis and keeps it whole on hover."""

from __future__ import annotations

import pytest

from tenants.models import Membership
from tests.browser.conftest import sign_in
from tests.conftest import make_team

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "autonomous-driving-perception-foundation-models-research-lab-eu"
WIDTHS = [1366, 1280, 1024]
# Each table box shown: its table's class, how wide the table is and how wide the box shows it.
TABLE_BOXES = """() => [...document.querySelectorAll('.table-wrap')].filter((box) => box.offsetParent)
  .map((box) => [box.firstElementChild.className, box.scrollWidth, box.clientWidth])"""


@pytest.fixture
def long_team_waits(tiers, owner, submit, cycle):
    """owner, also in the team of the long slug, has a job of it waiting for quota beside maps' running one."""
    assert len(LONG) == 63
    team = make_team(LONG, tiers, gpu=2, borrowing_limit=0)
    Membership.objects.create(user=owner, team=team)
    cycle()
    submit(name="runs", team=team, replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    submit(name="waits", team=team, replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    cycle()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_team_name_wraps_and_its_tables_fit_their_cards(page_at, owner, long_team_waits, width, shot):
    page = sign_in(page_at({"width": width, "height": 900}), owner)
    for name, path in (("dashboard", "/"), ("my-jobs", "/jobs/"), ("notifications", "/notifications/")):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        shot(page, f"long-team-{name}-{width}")
        assert page.locator(f".table .chip:has-text('{LONG}')").count() >= 1, f"{name} does not name the team"
        scrolled = [(table, wide, shown) for table, wide, shown in page.evaluate(TABLE_BOXES) if wide > shown]
        assert not scrolled, f"{name} at {width}px: tables scroll sideways in their boxes: {scrolled}"
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, f"{name} spills sideways"


def test_the_team_s_bar_ends_a_name_too_long_for_it_with_an_ellipsis(page_at, owner, long_team_waits):
    page = sign_in(page_at({"width": 1280, "height": 900}), owner)
    link = page.locator(f".team-bar-label a[href='/teams/{LONG}/']").first
    clipped = link.evaluate("""(a) => { let el = a; while (el && el.scrollWidth <= el.clientWidth) el = el.parentElement;
      return el && {tag: el.tagName, ellipsis: getComputedStyle(el).textOverflow}; }""")
    assert clipped == {"tag": "A", "ellipsis": "ellipsis"}, f"the name is cut by {clipped}, without an ellipsis"
    assert link.get_attribute("title") == LONG
