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


def console_errors(page) -> list[str]:
    found: list[str] = []
    page.on("console", lambda message: found.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: found.append(str(error)))
    return found


def test_swagger_ui_renders_under_the_policy_with_a_clean_console(page, log_in, owner, shot):
    errors = console_errors(page)
    log_in(owner, "/api/schema/swagger/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
    page.wait_for_timeout(500)
    shot(page, "api-swagger")
    assert errors == []
    assert page.locator(".swagger-ui .info .title").inner_text().startswith("Gangway API")


def test_redoc_renders_under_the_policy_with_nothing_from_elsewhere_and_a_clean_console(page, log_in, owner, shot):
    errors = console_errors(page)
    elsewhere: list[str] = []
    page.on("request", lambda request: elsewhere.append(request.url) if "localhost" not in request.url else None)
    log_in(owner, "/api/schema/redoc/")
    page.wait_for_selector("text=Gangway", timeout=15_000)
    page.wait_for_selector("[role=search] input, .menu-content", timeout=15_000)
    page.wait_for_timeout(1000)  # its search worker starts after the first render
    shot(page, "api-redoc")
    assert errors == [] and elsewhere == []
    # Redoc writes the version after the title in brackets: "(v1)", as in /api/v1/, not a bare "(1)".
    assert page.locator("h1").first.inner_text() == "Gangway API (v1)"
    assert page.locator("text=API docs by Redocly").count() == 1  # the attribution stays, its logo goes
