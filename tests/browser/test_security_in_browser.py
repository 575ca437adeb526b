"""The Content-Security-Policy holds in a real browser: pages and the API docs work with no violation."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def violations(page) -> list[str]:
    found: list[str] = []
    page.on("console", lambda message: found.append(message.text) if "Content Security Policy" in message.text else None)
    return found


def test_the_submit_page_and_its_live_preview_run_without_a_csp_violation(page, log_in, owner, nodes, cycle):
    cycle()
    seen = violations(page)
    log_in(owner, "/jobs/new/")
    page.fill("input[name$='gpu']", "2")
    page.wait_for_timeout(800)
    assert page.locator("text=Fit preview").count() == 1
    assert seen == []


def test_swagger_ui_renders_under_the_policy(page, log_in, owner, shot):
    seen = violations(page)
    log_in(owner, "/api/schema/swagger/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
    shot(page, "api-swagger")
    assert [text for text in seen if "script" in text] == []


def test_redoc_renders_under_the_policy_with_nothing_from_elsewhere(page, log_in, owner, shot):
    seen = violations(page)
    elsewhere: list[str] = []
    page.on("request", lambda request: elsewhere.append(request.url) if "localhost" not in request.url else None)
    log_in(owner, "/api/schema/redoc/")
    page.wait_for_selector("text=Gangway", timeout=15_000)
    page.wait_for_selector("[role=search] input, .menu-content", timeout=15_000)
    page.wait_for_timeout(1000)  # its search worker starts after the first render
    shot(page, "api-redoc")
    # All it tries to load from elsewhere is its "API docs by Redocly" logo, which the policy refuses.
    logo = "https://cdn.redoc.ly/redoc/logo-mini.svg"
    assert [text for text in seen if logo not in text] == [] and set(elsewhere) <= {logo}
