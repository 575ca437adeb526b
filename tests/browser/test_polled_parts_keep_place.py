"""In a real Chromium: a polled part that changes is swapped whole, and the reader keeps their place in
it: how far its boxes were scrolled, which replica logs were open, and the keyboard's focus."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduling.models import SimNode
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TABLET = {"width": 768, "height": 1024}


def settled(page, part_id: str) -> None:
    """Wait until htmx has swapped and settled the part `part_id` again."""
    page.evaluate("(id) => { window.__settled = []; document.addEventListener('htmx:afterSettle', "
                  "(e) => window.__settled.push(e.detail.target.id)); }", part_id)  # fmt: skip
    for _ in range(60):
        page.wait_for_timeout(250)
        if page.evaluate("(id) => window.__settled.includes(id)", part_id):
            return
    raise AssertionError(f"#{part_id} was never swapped")


@pytest.fixture
def many_nodes(nodes):
    """98 more nodes of 8 GPUs: the node map scrolls within its card."""
    SimNode.objects.bulk_create(SimNode(name=f"node-{i:02d}", gpu=8, cpu=64000, memory=512 * 1024**3)
                                for i in range(3, 101))  # fmt: skip


def test_the_node_map_keeps_its_scroll_when_a_cycle_changes_it(log_in, owner, many_nodes, submit, cycle):
    cycle()
    page = log_in(owner, "/")
    nodes = page.locator("#live-nodes .nodes")
    nodes.evaluate("(box) => { box.scrollTop = 80; }")
    assert nodes.evaluate("(box) => box.scrollTop") == 80  # it scrolls: more nodes than fit
    submit(name="lands-on-the-map", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    settled(page, "live-nodes")
    expect(page.locator("#live-nodes .gpus .t0 i")).to_have_count(4)
    assert page.locator("#live-nodes .nodes").evaluate("(box) => box.scrollTop") == 80


def test_the_queue_scrolled_sideways_on_a_tablet_stays_there_when_it_changes(page_at, owner, fill, submit, cycle):
    """A tablet still shows the queue's eight columns, wider than its screen (a phone folds each row instead)."""
    submit(name="first-waiting", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    page = sign_in(page_at(TABLET), owner)
    wrap = page.locator("#live-queue .table-wrap")
    at = wrap.evaluate("(box) => { box.scrollLeft = box.scrollWidth; return box.scrollLeft; }")  # to the reasons
    assert at > 0  # it scrolls: the reasons were off the tablet's screen
    submit(name="second-waiting", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    settled(page, "live-queue")
    expect(page.locator("#live-queue tbody tr")).to_have_count(2)
    assert page.locator("#live-queue .table-wrap").evaluate("(box) => box.scrollLeft") == at


def test_the_keyboard_focus_stays_on_cancel_when_the_job_page_updates(log_in, owner, fill, submit, cycle):
    job = submit(name="waits-here", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    page = log_in(owner, f"/jobs/{job.pk}/")
    page.focus("#job-live button:has-text('Cancel job')")
    cycle()  # the loop writes why it waits: the polled part changes
    settled(page, "job-live")
    expect(page.locator(".reason-big")).to_contain_text("Waiting for")
    expect(page.locator("#job-live button:has-text('Cancel job')")).to_be_focused()
