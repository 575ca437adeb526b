"""The node map and the usage charts for a reader who cannot tell the team colours apart, who uses the keyboard
or a touch screen rather than a mouse, or who reads on a tablet (WCAG 2.2 AA: 1.4.1, 1.4.13, 2.1.1, 1.4.10)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job
from scheduling.models import SimNode, UsageSample
from tests.browser.conftest import sign_in
from tests.browser.test_polled_parts_keep_place import settled
from tests.conftest import make_team

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEAMS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]  # with maps: ten teams

# How an element is painted, as the browser computed it: an SVG shape's fill (a key drawn as an svg: its
# shape's), else its background and inset ring. `colourless` drops the colours, leaving the drawing.
PAINT = """(el, colourless) => {
  const shape = el.matches('svg') ? el.querySelector(':scope > :is(rect, polygon, line, polyline)') : el;
  const style = getComputedStyle(shape);
  const paint = shape instanceof SVGElement ? `fill ${style.fill} stroke ${style.stroke} ${style.strokeDasharray}`
                                            : `${style.backgroundImage} ${style.boxShadow}`;
  return colourless ? paint.replace(/(rgba?|color)\\([^)]*\\)|#[0-9a-f]{3,8}\\b/gi, 'C') : paint;
}"""


def legend_key(page, legend: str, words: str):
    """The key drawn before `words` in the legend `legend` (a CSS selector)."""
    return page.locator(f"{legend} li").filter(has_text=re.compile(rf"^\s*{re.escape(words)}\s*$")).locator("> :first-child")


@pytest.fixture
def ten_teams(tiers, maps, staff, submit, cycle):
    """Ten teams (every colour of the palette), each holding 1 GPU of the two nodes."""
    cycle()
    submit(name="maps-one", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    for slug in TEAMS:
        submit(name=f"{slug}-one", team=make_team(slug, tiers, gpu=2), user=staff,
               replicas=[{"role": "Worker", "count": 1, "gpu": 1}])  # fmt: skip
    cycle()


def test_each_team_s_gpus_carry_a_mark_of_their_own_shown_by_the_legend(log_in, staff, ten_teams):
    page = log_in(staff, "/")
    cells = page.locator("#live-nodes .gpus > span[class^=t] > i")
    expect(cells).to_have_count(10)
    marks = {run.get_attribute("title").split(":")[0]: run.locator("i").evaluate(PAINT, True)
             for run in page.locator("#live-nodes .gpus > span[class^=t]").all()}  # fmt: skip
    assert len(set(marks.values())) == 10, f"teams told apart by colour alone: {marks}"
    for slug, mark in marks.items():
        assert legend_key(page, "#live-nodes .legend", slug).evaluate(PAINT, True) == mark, slug


def test_the_team_chart_draws_borrowed_gpus_with_the_hatching_its_legend_shows(log_in, owner, maps):
    now = timezone.now()
    UsageSample.objects.bulk_create(UsageSample(team=maps, at=now - timedelta(minutes=m), gpu_used=12, gpu_borrowed=4,
                                                gpu_nominal=8, gpu_waiting=0) for m in range(5, 120, 5))  # fmt: skip
    page = log_in(owner, "/teams/maps/")
    chart = page.locator("section[aria-labelledby=chart-h] svg.chart:visible")
    legend = "section[aria-labelledby=chart-h] .legend"
    borrowed = legend_key(page, legend, "Borrowed").evaluate(PAINT, False)
    assert borrowed == chart.locator("polygon.borrowed").evaluate(PAINT, False)
    assert "url(" in borrowed  # a pattern, as the legend says: not a flat colour
    assert legend_key(page, legend, "In use").evaluate(PAINT, False) == chart.locator("polygon.used").evaluate(PAINT, False)
    assert legend_key(page, legend, "Nominal").evaluate(PAINT, False) == chart.locator("polyline.nominal").evaluate(PAINT, False)


def test_the_dashboard_s_legends_draw_their_keys_as_the_bars_and_cells_are_drawn(log_in, owner, vision, staff, submit, cycle):
    cycle()
    submit(name="borrows", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    submit(name="borrows-more", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    cycle()
    big = submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    Job.objects.filter(pk=big.pk).update(reservation={"start": timezone.now().isoformat(), "placement": {"node-02": 1},
                                                      "nodes": ["node-02"]})  # fmt: skip
    page = log_in(owner, "/")
    bar = page.locator("#live-teams .team-bar").filter(has_text="maps")
    for kind, words in [("borrowed", "Borrowed above nominal"), ("within", "Used within nominal")]:
        key = legend_key(page, "#live-teams .legend", words).evaluate(PAINT, True)
        assert key == bar.locator(f".seg.{kind}").evaluate(PAINT, True), words  # the legend's keys are grey, the bars the team's
    for cell, words in [(".reserved i", "Reserved for a starving job"), ("i.free", "Free")]:
        key = legend_key(page, "#live-nodes .legend", words).evaluate(PAINT, False)
        assert key == page.locator(f"#live-nodes .gpus {cell}").first.evaluate(PAINT, False), words


@pytest.fixture
def hundred_nodes(nodes):
    """98 more nodes of 8 GPUs: a map of 100 nodes, more than its box shows."""
    SimNode.objects.bulk_create(SimNode(name=f"node-{i:02d}", gpu=8, cpu=64000, memory=512 * 1024**3)
                                for i in range(3, 101))  # fmt: skip


def tab_into_the_map(page, limit: int = 60):
    """Press Tab until a node of the map has the focus; returns how many presses it took."""
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if page.evaluate("!!document.activeElement.closest('.nodes')"):
            return presses
    raise AssertionError("Tab never reached the node map")


def test_the_node_map_is_one_tab_stop_whose_nodes_the_arrow_keys_visit_and_show(log_in, owner, hundred_nodes, submit, cycle):
    cycle()
    job = submit(name="four-gpus", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    page = log_in(owner, "/")
    detail = page.locator("#live-nodes [data-node-detail]")
    tab_into_the_map(page)
    first = f"node-01: 4 of 8 GPUs in use — maps: four-gpus (#{job.pk}) · 4 GPUs; 4 free."
    expect(page.get_by_role("img", name=first, exact=True)).to_be_focused()
    expect(detail).to_have_text(first)  # in sight, not only in a tooltip no keyboard opens
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("img", name="node-02: 0 of 8 GPUs in use — 8 free.", exact=True)).to_be_focused()
    expect(detail).to_have_text("node-02: 0 of 8 GPUs in use — 8 free.")
    page.keyboard.press("End")
    expect(page.locator(".nodes .node:focus .node-name")).to_have_text(page.locator(".nodes .node-name").last.text_content())
    page.keyboard.press("Home")
    page.keyboard.press("ArrowDown")  # the node under node-01, a row further
    below = page.evaluate("() => { const n = document.querySelectorAll('.nodes .node'), f = document.activeElement;"
                          " return [f.getBoundingClientRect().left - n[0].getBoundingClientRect().left, f.getBoundingClientRect().top > n[0].getBoundingClientRect().bottom]; }")  # fmt: skip
    assert below[0] == 0 and below[1], below
    visited = page.evaluate("document.activeElement.querySelector('.node-name').textContent")
    page.keyboard.press("Tab")
    assert not page.evaluate("!!document.activeElement.closest('.nodes')"), "one Tab leaves a map of 100 nodes"
    page.keyboard.press("Shift+Tab")
    expect(page.locator(".nodes .node:focus .node-name")).to_have_text(visited)  # back where the reader was


def test_a_node_keeps_the_focus_and_shows_its_new_words_when_a_cycle_changes_the_map(log_in, owner, submit, cycle):
    cycle()
    page = log_in(owner, "/")
    tab_into_the_map(page)
    page.keyboard.press("ArrowRight")
    expect(page.locator(".nodes .node:focus")).to_contain_text("node-02")
    submit(name="lands", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    settled(page, "live-nodes")
    expect(page.locator(".nodes .node:focus .node-name")).to_have_text("node-02")
    expect(page.locator("#live-nodes [data-node-detail]")).to_have_text(re.compile(r"^node-02: "))


def test_pointing_at_or_tapping_a_node_shows_its_words(log_in, owner, submit, cycle):
    cycle()
    page = log_in(owner, "/")
    detail = page.locator("#live-nodes [data-node-detail]")
    page.locator(".nodes .node").nth(1).hover()
    expect(detail).to_have_text("node-02: 0 of 8 GPUs in use — 8 free.")
    page.locator(".nodes .node").nth(0).click()  # a tap: no tooltip on a touch screen
    page.mouse.move(0, 0)
    expect(detail).to_have_text("node-01: 0 of 8 GPUs in use — 8 free.")


@pytest.mark.parametrize("width", [768, 800, 1024])
def test_on_a_tablet_a_wide_table_scrolls_in_its_box_and_the_page_does_not(page_at, owner, fill, submit, width):
    for number in range(3):
        submit(name=f"waits-with-a-long-name-{number}", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    for path in ["/", "/jobs/", "/teams/maps/"]:
        page = sign_in(page_at({"width": width, "height": 1000}), owner, path)
        page.wait_for_load_state("networkidle")
        spill = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert spill <= 0, f"{path} spills {spill}px sideways at {width}px"
        boxes = page.locator(".table-wrap").evaluate_all("(boxes) => boxes.map((b) => b.getBoundingClientRect().right)")
        assert boxes and max(boxes) <= width, f"{path}: a table's box ends past the screen: {boxes}"
