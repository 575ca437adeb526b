"""Playwright driving the system Chromium against pytest-django's live server.

Without /usr/bin/chromium the browser tests fail under CI=true (the suite must
not pass by skipping them there) and are skipped elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing; install it with `make browser`."
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=15_000)  # a loaded 2-core CI machine can take seconds to answer

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, user, next_path: str = "/"):
    """Logs `page` in through the login form as `user` (password "pw"), landing on `next_path`; returns it."""
    page.goto(f"/login/?next={next_path}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"**{next_path}")
    return page


@pytest.fixture
def log_in(page):
    """Log the page in through the login form as `user` (password "pw")."""

    def _log_in(user, next_path: str = "/"):
        return sign_in(page, user, next_path)

    return _log_in


@pytest.fixture
def page_at(browser, live_server):
    """A new page as wide as `viewport` (PHONE, DESKTOP), in a context of its own closed after the test."""
    contexts = []

    def _page_at(viewport: dict):
        context = browser.new_context(viewport=viewport, base_url=live_server.url)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield _page_at
    for context in contexts:
        context.close()


@pytest.fixture
def shot():
    """Save a full-page screenshot as test-artifacts/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def _shot(page, name: str):
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    return _shot


@pytest.fixture
def fill(submit, cycle):
    """Both nodes busy with one job of maps, so a new 8-GPU job must wait."""
    cycle()
    job = submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    return job
