"""A team's slug may be 63 characters long (a namespace's limit): on the notifications page its webhook form,
its name over the form and the button that saves it ("Save the webhook of <team>") stay inside their card,
the button's words inside the button, at desktop widths (1366 px, 1280 px) and a phone's (390 px, 360 px)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DESKTOP, PHONE, sign_in
from tests.conftest import make_team, make_user
from tenants.models import Membership

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "autonomous-driving-perception-research-and-evaluation-platforms"
WIDTHS = [DESKTOP, {"width": 1280, "height": 800}, PHONE, {"width": 360, "height": PHONE["height"]}]

# The box of an element and of the text inside it (a button's text can run out of a button that fits).
BOXES = """(el) => { const box = el.getBoundingClientRect(), range = document.createRange();
  range.selectNodeContents(el); const text = range.getBoundingClientRect();
  return {left: box.left, right: box.right, textLeft: text.left, textRight: text.right,
          scroll: el.scrollWidth, client: el.clientWidth}; }"""


@pytest.fixture
def long_lead(tiers):
    """The lead of a team whose slug is 63 characters long."""
    assert len(LONG) == 63
    return make_user("long-lead", teams=[make_team(LONG, tiers, gpu=8)], role=Membership.Role.LEAD)


@pytest.mark.parametrize("viewport", WIDTHS, ids=[str(viewport["width"]) for viewport in WIDTHS])
def test_the_save_button_of_a_long_named_team_s_webhook_stays_in_its_card(page_at, long_lead, viewport, shot):
    page = sign_in(page_at(viewport), long_lead, "/notifications/")
    button = page.get_by_role("button", name=f"Save the webhook of {LONG}")
    expect(button).to_be_visible()
    shot(page, f"notifications-long-team-{viewport['width']}")
    card = page.locator("section[aria-labelledby=hooks-h]").evaluate(BOXES)
    form = page.locator(f"#webhook-{LONG}").evaluate(BOXES)
    drawn = button.evaluate(BOXES)
    name = page.locator(f"#webhook-{LONG} h3 .chip").evaluate(BOXES)
    for what, inner, outer in (("the button", drawn, form), ("the team's name", name, form), ("the form", form, card)):
        assert outer["left"] <= inner["left"] and inner["right"] <= outer["right"] + 0.5, f"{what} {inner} out of {outer}"
    assert drawn["left"] <= drawn["textLeft"] and drawn["textRight"] <= drawn["right"] + 0.5, f"the button's words run out of it: {drawn}"
    assert drawn["scroll"] <= drawn["client"], drawn
    spills = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert spills <= 0, f"the page spills {spills}px sideways"
