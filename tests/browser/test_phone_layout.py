"""What a review found on a phone (390 px): tables wider than the screen with rows many lines tall, the
staff header's "+ Submit job" past the right edge, and the quota editor's columns off screen."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.browser.conftest import PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1400, "height": 900}
TABLE_PAGES = {"dashboard": "/", "my-jobs": "/jobs/", "teams": "/teams/", "team": "/teams/maps/"}

# For every table shown: how wide it is against the box it scrolls in, each row's height, how wide the
# reason is against its row, and each labelled cell's label as the phone shows it.
TABLES = """() => [...document.querySelectorAll(".table-wrap > table")].filter((t) => t.offsetParent).map((t) => ({
  name: t.className,
  width: t.getBoundingClientRect().width,
  room: t.parentElement.clientWidth,
  rows: [...t.tBodies[0].rows].map((row) => row.getBoundingClientRect().height),
  reasons: [...t.querySelectorAll("td.reason")].map((td) => td.offsetWidth / td.parentElement.offsetWidth),
  labels: [...t.querySelectorAll("td[data-label]")].map((td) => [td.dataset.label, getComputedStyle(td, "::before").content]),
  headings: t.tHead.getBoundingClientRect().height,
}))"""
SPILL = "document.scrollingElement.scrollWidth - window.innerWidth"


@pytest.fixture
def busy(gpu_types, staff, submit, cycle):
    """maps runs 6 a100 GPUs and 2 l4 GPUs; staff's job with a long name asks for 8 a100 GPUs and waits."""
    for name, gpus, gpu_type, user in (("big-a100", 6, "a100", None), ("small-l4", 2, "l4", None),
                                       ("a-rather-long-pretraining-run-name-for-a-phone", 8, "a100", staff)):  # fmt: skip
        job = submit(name=name, user=user, replicas=[{"role": "Worker", "count": 1, "gpu": gpus}])
        Job.objects.filter(pk=job.pk).update(gpu_type=[gpu_type])
    cycle()


def _edges(page, selector: str) -> list[tuple[str, float, float]]:
    """(text, left, right) of every visible element matching `selector`, in CSS pixels of the page."""
    return page.locator(selector).evaluate_all(
        "(els) => els.filter((el) => el.offsetParent).map((el) => { const box = el.getBoundingClientRect();"
        " return [el.textContent.trim() || el.name || el.id, box.left, box.right]; })"
    )


@pytest.mark.parametrize("name", TABLE_PAGES)
def test_tables_fold_into_rows_that_fit_a_phone(page_at, staff, busy, name):
    page = sign_in(page_at(PHONE), staff, TABLE_PAGES[name])
    page.wait_for_load_state("networkidle")
    assert page.evaluate(SPILL) <= 0, f"{name} spills sideways"
    tables = page.evaluate(TABLES)
    assert tables, f"{name} shows no table"
    for table in tables:
        where = f"{table['name']} on {name}"
        assert table["width"] <= table["room"] + 1, f"{where}: {table['width']:.0f}px wide in {table['room']}px"
        assert max(table["rows"]) <= 0.4 * PHONE["height"], f"{where}: rows {table['rows']}px high"
        assert all(share >= 0.9 for share in table["reasons"]), f"{where}: reasons {table['reasons']} of a row wide"
        assert all(shown == f'"{label}"' for label, shown in table["labels"]), table["labels"]  # each value named
    if name == "dashboard":
        assert any("queue" in table["name"] and table["reasons"] for table in tables)  # the waiting job and its reason


def test_tables_keep_their_columns_on_a_wide_screen(page_at, staff, busy):
    page = sign_in(page_at(WIDE), staff, "/")
    page.wait_for_load_state("networkidle")
    (queue,) = [table for table in page.evaluate(TABLES) if "queue" in table["name"]]
    assert queue["headings"] > 0 and queue["reasons"][0] < 0.5  # a heading row, and the reason one column of eight
    assert page.locator("table.queue tbody td").first.evaluate("(td) => getComputedStyle(td).display") == "table-cell"


@pytest.mark.parametrize("width", [390, 360])
def test_every_header_control_of_staff_is_on_a_phone_s_screen(page_at, staff, width):
    page = sign_in(page_at({"width": width, "height": PHONE["height"]}), staff)
    controls = _edges(page, "header.topbar a, header.topbar button")
    assert "+ Submit job" in [text for text, _, _ in controls]
    outside = [(text, round(left), round(right)) for text, left, right in controls if left < 0 or right > width]
    assert not outside, f"past the edge of a {width}px screen: {outside}"


def test_the_quota_editor_s_inputs_are_on_a_phone_s_screen(page_at, staff, gpu_types):
    page = sign_in(page_at(PHONE), staff, "/teams/maps/quota/")
    inputs = _edges(page, "#quota-form input:not([type=hidden]), #quota-form button")
    assert len(inputs) == 4 * 3 + 1 + 2  # l4, a100, CPU and memory by three limits, the weight, two buttons
    outside = [(text, round(left), round(right)) for text, left, right in inputs if left < 0 or right > PHONE["width"]]
    assert not outside, f"past the edge of the phone's screen: {outside}"
    assert page.evaluate(SPILL) <= 0
    labels = page.locator(".quota-table tbody tr").evaluate_all(
        "(rows) => rows.map((row) => [...row.cells].filter((cell) => cell.matches('td'))"
        ".map((td) => getComputedStyle(td, '::before').content))"
    )
    assert labels == [['"Nominal"', '"Borrowing limit"', '"Lending limit"']] * 4  # each input named by its column


def test_the_quota_preview_s_limits_are_on_a_phone_s_screen(page_at, staff, gpu_types):
    page = sign_in(page_at(PHONE), staff, "/teams/maps/quota/")
    page.fill("#id_gpu-a100_nominal", "6")
    page.click("text=Preview change")
    page.locator(".whatif-limits").wait_for()
    outside = [(text, round(left), round(right)) for text, left, right in _edges(page, ".whatif-limits td")
               if left < 0 or right > PHONE["width"]]  # fmt: skip
    assert not outside, f"a limit's figures past the edge of the phone's screen: {outside}"
    assert page.evaluate(SPILL) <= 0
