"""The header between a phone and a wide laptop (721 to 1100 px), for staff, whose header holds the most: every
link stays on one line, clear of every other, the user's own links wrapping under the main ones when the bar
runs out of room. At 800 px "Teams & quotas" was drawn over the user's name and "+ Submit job" over "My
tokens", each broken over two or three lines."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each control of the header: its words, its box, and how many lines its words take.
CONTROLS = """() => [...document.querySelectorAll('.topbar a:not(.skip-link), .topbar button, .topbar .user')].map((el) => {
  const box = el.getBoundingClientRect(), range = document.createRange(); range.selectNodeContents(el);
  const middles = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => (r.top + r.bottom) / 2);
  const lines = middles.filter((y, i) => middles.slice(0, i).every((seen) => Math.abs(seen - y) > 8)).length;
  return [el.textContent.trim(), box.left, box.top, box.right, box.bottom, lines]; })"""


@pytest.mark.parametrize("width", [721, 800, 900, 1024, 1100])
def test_the_header_s_links_keep_clear_of_each_other(page_at, staff, width, shot):
    page = sign_in(page_at({"width": width, "height": 800}), staff)
    shot(page, f"header-staff-{width}")
    controls = page.evaluate(CONTROLS)
    assert any(text == "+ Submit job" for text, *_ in controls)
    broken = [text for text, *_, lines in controls if lines > 1]
    assert not broken, f"at {width}px these header links break over lines: {broken}"
    overlapping = [(a[0], b[0]) for i, a in enumerate(controls) for b in controls[i + 1:]
                   if a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5
                   and not (a[0].startswith(b[0]) or b[0].startswith(a[0]))]  # fmt: skip
    assert not overlapping, f"at {width}px these header links are drawn over each other: {overlapping}"
    outside = [text for text, left, _, right, *_ in controls if left < 0 or right > width]
    assert not outside, f"at {width}px past the screen's edge: {outside}"
