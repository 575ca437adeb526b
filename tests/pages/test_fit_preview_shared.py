"""The submit form's fit previews of one web process share one reading of the queue and the cluster while
nothing a page shows changes, for FIT_PREVIEW_REUSE seconds at most: a busy queue took seconds to read at each
pause in the typing of everyone on the form."""

from __future__ import annotations

import pytest

from scheduling import preview
from tests.pages.test_submit_page import form_data

WAITS = {"replicas-0-count": "1", "replicas-0-gpu": "8"}


@pytest.fixture
def reads(monkeypatch, settings):
    """The readings of the world previews make, counted; sharing on, and nothing shared from another test."""
    settings.FIT_PREVIEW_REUSE = 5
    monkeypatch.setattr(preview, "_shared", None)
    counted = []
    real = preview.build_world

    def build_world(**kwargs):
        counted.append(kwargs["now"])
        return real(**kwargs)
    monkeypatch.setattr(preview, "build_world", build_world)
    return counted


def test_previews_share_one_reading_while_nothing_changes(login, owner, fill_and_wait, reads):
    fill_and_wait(1)
    client = login(owner)
    first = client.post("/jobs/new/preview/", form_data(**WAITS)).content.decode()
    again = client.post("/jobs/new/preview/", form_data(**WAITS)).content.decode()
    assert len(reads) == 1 and first == again and "position 2" in again


def test_a_change_a_page_shows_is_read_by_the_next_preview(login, owner, fill_and_wait, submit, reads):
    fill_and_wait(1)
    client = login(owner)
    assert "position 2" in client.post("/jobs/new/preview/", form_data(**WAITS)).content.decode()
    submit(name="another", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])  # its submission's event
    assert "position 3" in client.post("/jobs/new/preview/", form_data(**WAITS)).content.decode()
    assert len(reads) == 2


def test_a_reading_is_shared_for_fit_preview_reuse_seconds_at_most(login, owner, fill_and_wait, reads, monkeypatch):
    fill_and_wait(1)
    client = login(owner)
    clock = [1000.0]
    monkeypatch.setattr(preview.time, "monotonic", lambda: clock[0])
    client.post("/jobs/new/preview/", form_data(**WAITS))
    clock[0] += 4.9
    client.post("/jobs/new/preview/", form_data(**WAITS))
    clock[0] += 0.2
    client.post("/jobs/new/preview/", form_data(**WAITS))
    assert len(reads) == 2


def test_with_fit_preview_reuse_at_zero_each_preview_reads_afresh(login, owner, fill_and_wait, reads, settings):
    settings.FIT_PREVIEW_REUSE = 0
    fill_and_wait(1)
    client = login(owner)
    for _ in range(2):
        client.post("/jobs/new/preview/", form_data(**WAITS))
    assert len(reads) == 2
