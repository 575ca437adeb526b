"""More teams than colours: sixteen teams on the node map, each drawn in a colour and mark no other team has,
as its legend shows them, on a laptop and on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DESKTOP, PHONE, sign_in
from tests.browser.test_node_map_and_charts_in_a_browser import legend_key

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How a cell or a key is drawn: its mark (the background image, in its ink) over its colour.
LOOK = "(el) => { const s = getComputedStyle(el); return `${s.backgroundImage} over ${s.backgroundColor}`; }"
# With maps: sixteen teams, one for each GPU of the two nodes.
TEAMS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar"]  # fmt: skip


@pytest.fixture
def sixteen_teams(teams_holding_a_gpu):
    """Sixteen teams, each holding 1 GPU of the two nodes."""
    teams_holding_a_gpu(TEAMS, gpu=1)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["laptop", "phone"])
def test_sixteen_teams_are_sixteen_looks_on_the_map_and_in_its_legend(page_at, staff, sixteen_teams, viewport):
    page = sign_in(page_at(viewport), staff, "/")
    runs = page.locator("#live-nodes .gpus > span[title]")
    expect(runs).to_have_count(16)
    looks = {run.get_attribute("title").split(":")[0]: run.locator("i").first.evaluate(LOOK) for run in runs.all()}
    assert len(looks) == 16 and len(set(looks.values())) == 16, f"teams drawn alike: {looks}"
    colours = {slug: look.rsplit(" over ", 1)[1] for slug, look in looks.items()}
    assert colours["alpha"] == colours["kilo"] and looks["alpha"] != looks["kilo"]  # made 10 apart: two marks
    for slug, look in looks.items():
        key = legend_key(page, "#live-nodes .legend", slug)
        assert key.evaluate(LOOK) == look, slug
        box = key.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], slug  # its key on the screen
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
