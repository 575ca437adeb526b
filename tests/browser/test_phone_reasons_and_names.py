"""On a phone (390 px, and 360 px), the pages a waiting job is followed on keep every key cell on the screen:
its name, state, team, place, estimated start and reason, with a team name as long as a namespace may be
(63 characters) and a reason about two GPU types, which reads a line per type."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tenants.models import Membership, Quota, Team
from tests.browser.conftest import PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "autonomous-driving-perception-research-and-evaluation-platforms"
DESKTOP = {"width": 1280, "height": 800}

# Each visible key cell of the page, with its left and right edges: a job's name, state, team, place in the
# queue, estimated start and reason (and each line of a reason laid out by type).
KEY_CELLS = """() => [...document.querySelectorAll(
    'td.job a, td .badge, h1 .badge, .chip, td.reason, .why-lead, .why-type, .why-tail, '
    + 'table.queue td:first-child, td[data-label="Starts in"]')]
  .filter((el) => el.offsetParent && el.getClientRects().length)
  .map((el) => { const box = el.getBoundingClientRect(), text = el.textContent.trim().slice(0, 80);
                 return [el.className || el.tagName, text, Math.round(box.left), Math.round(box.right)]; })"""
# Each box a table scrolls in, as wide as its table and as wide as it shows.
TABLE_BOXES = """() => [...document.querySelectorAll('.table-wrap')].filter((box) => box.offsetParent)
  .map((box) => [box.firstElementChild.className, box.scrollWidth, box.clientWidth])"""


@pytest.fixture
def world(gpu_types, tiers, owner, submit, cycle):
    """maps runs 2 l4 and 3 a100 GPUs and its `either` (8 GPUs of any type) waits for quota on both types;
    the owner's other team, whose slug is 63 characters long, runs one job of 2 l4 GPUs and queues another."""
    assert len(LONG) == 63
    team = Team.objects.create(slug=LONG, name=LONG.replace("-", " ").capitalize(), default_tier=tiers["standard"])
    team.tiers.set(tiers.values())
    Quota.objects.create(team=team, resource=gpu_types["l4"].resource, nominal=2, borrowing_limit=0, max_per_replica=8)
    Membership.objects.create(user=owner, team=team)
    for name, gpus, kind in (("l4-two", 2, "l4"), ("a100-three", 3, "a100")):
        submit(name=name, gpu_type=[kind], replicas=[{"role": "Worker", "count": 1, "gpu": gpus}])
    submit(name="runs-in-the-long-team", team=team, replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    cycle()
    either = submit(name="either", replicas=[{"role": "Worker", "count": 2, "gpu": 4}])
    waits = submit(name="waits-in-the-long-team", team=team, replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    cycle()
    assert set(Job.objects.filter(pk__in=[either.pk, waits.pk]).values_list("state", flat=True)) == {"queued"}
    return {"either": either, "waits": waits}


# (page, path, width, whether it shows the long team's chip)
PAGES = [("dashboard", "/", 390, True), ("my-jobs", "/jobs/", 390, True), ("team", "/teams/maps/", 390, False),
         ("long-team", f"/teams/{LONG}/", 390, False), ("job", "/jobs/{either}/", 390, False),
         ("job", "/jobs/{either}/", 360, False), ("long-team-job", "/jobs/{waits}/", 360, True)]  # fmt: skip


@pytest.mark.parametrize("name, path, width, long_chip", PAGES, ids=[f"{page[0]}-{page[2]}" for page in PAGES])
def test_every_key_cell_is_on_a_phone_s_screen(page_at, owner, world, name, path, width, long_chip):
    path = path.format(**{key: job.pk for key, job in world.items()})
    page = sign_in(page_at({"width": width, "height": PHONE["height"]}), owner, path)
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, f"{name} spills sideways"
    scrolled = [(table, wide, shown) for table, wide, shown in page.evaluate(TABLE_BOXES) if wide > shown + 1]
    assert not scrolled, f"{name}: tables scroll sideways in their boxes: {scrolled}"
    cells = page.evaluate(KEY_CELLS)
    assert any(LONG in text for _, text, _, _ in cells) == long_chip, cells
    outside = [cell for cell in cells if cell[2] < 0 or cell[3] > width]
    assert not outside, f"{name}: key cells past the edge of a {width}px screen: {outside}"


def test_a_reason_about_two_types_reads_a_line_per_type_on_a_phone(page_at, owner, world):
    page = sign_in(page_at(PHONE), owner, "/")
    reason = page.locator(f"#queue-row-{world['either'].pk} td.reason")
    lines = reason.locator(".why-lead, .why-type").evaluate_all(
        "(els) => els.map((el) => [el.textContent.trim(), el.getBoundingClientRect().top, el.getBoundingClientRect().right])"
    )
    assert [text.split(":")[0] for text, _, _ in lines] == ["Waiting for quota", "l4", "a100"]
    assert reason.inner_text().count("Waiting for quota") == 1
    tops = [top for _, top, _ in lines]
    assert tops == sorted(tops) and len(set(tops)) == 3, f"not a line each: {lines}"
    assert max(right for _, _, right in lines) <= PHONE["width"]


def test_on_a_wide_screen_the_lines_stack_in_the_queue_s_reason_column(page_at, owner, world):
    page = sign_in(page_at(DESKTOP), owner, "/")
    row = page.locator(f"#queue-row-{world['either'].pk}")
    assert row.locator("td").first.evaluate("(td) => getComputedStyle(td).display") == "table-cell"
    share = row.locator("td.reason").evaluate("(td) => td.offsetWidth / td.parentElement.offsetWidth")
    assert share < 0.5  # one column of eight, as before
    tops = row.locator(".why-type").evaluate_all("(els) => els.map((el) => el.getBoundingClientRect().top)")
    assert len(tops) == 2 and tops[0] < tops[1]
