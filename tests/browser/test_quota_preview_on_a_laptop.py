"""The quota editor's preview on a laptop or desktop (1024 to 1366 px): its table of limits, now and after the
change, stays in its card beside the form, and the page never scrolls sideways, though a lending limit of "all
unused" is the widest figure it shows."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The table's right edge, and its card's inner right edge (less the card's padding).
EDGES = """(table) => { const card = table.closest('.card'); const pad = parseFloat(getComputedStyle(card).paddingRight);
  return [table.getBoundingClientRect().right, card.getBoundingClientRect().right - pad]; }"""


@pytest.mark.parametrize("width", [1366, 1280, 1120, 1024])
def test_the_quota_preview_s_limits_stay_in_their_card(page_at, staff, gpu_types, width, shot):
    page = sign_in(page_at({"width": width, "height": 900}), staff, "/teams/maps/quota/")
    page.fill("#id_gpu-a100_nominal", "6")
    page.click("text=Preview change")
    table = page.locator(".whatif-limits")
    table.wait_for()
    shot(page, f"quota-preview-{width}")
    assert "all unused" in table.text_content()
    right, room = table.evaluate(EDGES)
    assert right <= room + 0.5, f"at {width}px the limits end at {right:.0f}px, past their card's {room:.0f}px"
    spill = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert spill <= 0, f"at {width}px the quota page spills {spill}px sideways"


@pytest.mark.parametrize("width", [1366, 1280, 1120, 1024])
def test_every_input_of_the_quota_editor_shows_in_its_card(page_at, staff, gpu_types, width):
    """The form's table of limits fits the card beside the preview: at 1024 px its lending limits were cut off
    at the card's edge, reached only by scrolling the table sideways."""
    page = sign_in(page_at({"width": width, "height": 900}), staff, "/teams/maps/quota/")
    box = page.locator("#quota-form .table-wrap").evaluate("(box) => [box.scrollWidth, box.clientWidth]")
    assert box[0] <= box[1], f"at {width}px the quota table is {box[0]}px wide in a box of {box[1]}px"
    right, room = page.locator("#quota-form table").evaluate(EDGES)
    assert right <= room + 0.5, f"at {width}px the quota table ends at {right:.0f}px, past its card's {room:.0f}px"


@pytest.mark.parametrize("width", [1366, 1280, 1024])
def test_the_quota_editor_s_errors_wrap_in_their_cells(page_at, staff, gpu_types, width, shot):
    """A saved form's errors sit under their inputs and wrap there: at 1280 px one error's line widened the table
    past its card, its lending limits cut to "LENDI" and inputs showing "all"."""
    page = sign_in(page_at({"width": width, "height": 900}), staff, "/teams/maps/quota/")
    page.fill("#id_gpu-a100_nominal", "-3")
    page.fill("#id_gpu-a100_borrowing_limit", "plenty")
    page.fill("#id_gpu-a100_lending_limit", "-1")
    page.fill("#id_weight", "0")
    page.click("text=Save quota")
    page.locator("#quota-form .quota-table .field-error").first.wait_for()
    shot(page, f"quota-errors-{width}")
    assert page.locator("#quota-form .quota-table .field-error").count() == 3
    box = page.locator("#quota-form .table-wrap").evaluate("(box) => [box.scrollWidth, box.clientWidth]")
    assert box[0] <= box[1], f"at {width}px the quota table is {box[0]}px wide in a box of {box[1]}px"
    right, room = page.locator("#quota-form table").evaluate(EDGES)
    assert right <= room + 0.5, f"at {width}px the quota table ends at {right:.0f}px, past its card's {room:.0f}px"
    lending = page.locator("#id_gpu-a100_lending_limit").evaluate(
        "(input) => [input.getBoundingClientRect().right, input.closest('.table-wrap').getBoundingClientRect().right]")
    assert lending[0] <= lending[1] + 0.5, f"at {width}px the lending limit ends at {lending[0]:.0f}px, past {lending[1]:.0f}px"
