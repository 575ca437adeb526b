"""A node map of more nodes than its box shows scrolls within its box, and the page ends at its footer: each
node's words for a screen reader (a visually hidden span, positioned absolutely) once escaped the box, and a
cluster of 120 nodes left the dashboard scrolling on into thousands of pixels of nothing below the footer."""

from __future__ import annotations

import pytest

from scheduling.models import SimNode
from tests.browser.conftest import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How far the page scrolls past its footer's end, and how far the node map's box scrolls.
PAST_FOOTER = """() => { const footer = document.querySelector('footer.footer').getBoundingClientRect().bottom + scrollY;
  const nodes = document.querySelector('.nodes');
  return [document.documentElement.scrollHeight - footer, nodes.scrollHeight - nodes.clientHeight]; }"""


@pytest.fixture
def many_nodes(nodes, staff, cycle):
    """120 simulated nodes of 8 GPUs."""
    SimNode.objects.bulk_create(SimNode(name=f"node-{i:03d}", gpu=8, cpu=64000, memory=512 * 1024**3) for i in range(3, 121))
    cycle()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_dashboard_ends_at_its_footer_however_many_nodes(page_at, staff, many_nodes, viewport, shot):
    page = sign_in(page_at(viewport), staff)
    page.wait_for_load_state("networkidle")
    shot(page, f"node-map-120-nodes-{viewport['width']}")
    past, scrolls = page.evaluate(PAST_FOOTER)
    assert scrolls > 0, "the node map's box shows every node: too few nodes to test"
    assert past <= 1, f"the page scrolls {past:.0f}px past its footer"
