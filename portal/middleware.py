"""Requests refused before any view (a URL carrying text no name, slug or id can hold), the answer to a
live part asked for by a browser whose session has ended, and the portal's own error pages in debug."""

from __future__ import annotations

import logging
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.core.exceptions import BadRequest, DisallowedHost, PermissionDenied, SuspiciousOperation
from django.http import Http404, JsonResponse
from django.shortcuts import render, resolve_url
from django.urls import Resolver404, resolve
from django.utils.log import log_response
from django_htmx.http import HttpResponseClientRedirect

from portal.views import bad_request, not_allowed, not_found, server_error
from tenants.inputs import text_problem


def refuse_unstorable_urls(get_response):
    """Answers 400 when the path or a query value holds NUL (or a lone surrogate).

    No team slug, job id or filter value contains one, and PostgreSQL refuses
    NUL in a query, so a view that looked it up would fail with a 500. The API
    answers in DRF's shapes: {"detail": ...} for the path, {name: [...]} for a
    query parameter.
    """

    def middleware(request):
        where, problem = _first_problem(request)
        if not problem:
            return get_response(request)
        if request.path_info.startswith("/api/"):
            body = {where: [problem]} if where else {"detail": f"The address cannot be read: {_lower(problem)}"}
            return JsonResponse(body, status=400)
        named = f"parameter {where!r}" if where else "address"
        return render(request, "400.html", {"message": f"The {named} cannot be read: {_lower(problem)}"}, status=400)

    return middleware


def _first_problem(request) -> tuple[str, str]:
    """("", problem) for the path, (parameter, problem) for a query value, ("", "") when the URL is clean."""
    problem = text_problem(request.path_info)
    if problem:
        return "", problem
    for name, values in request.GET.lists():
        for value in (name, *values):
            if text_problem(value):
                return ("query" if text_problem(name) else name), text_problem(value)
    return "", ""


def _lower(sentence: str) -> str:
    return sentence[:1].lower() + sentence[1:]


def form_posts_only(get_response):
    """Answers the portal's 405 page, its Allow header kept, where a view that takes only a form's post
    (`require_POST`: a job's cancel, a token's revoke) answers an address opened in the browser with Django's
    blank 405. The API's answers are its own (DRF's {"detail": ...})."""

    def middleware(request):
        response = get_response(request)
        if (response.status_code != 405 or response.content or request.path_info.startswith("/api/")
                or request.method == "HEAD"):
            return response
        page = not_allowed(request, response.get("Allow", ""))
        # require_POST logged the refusal already; the mark Django's log_response reads keeps it from twice.
        page._has_been_logged = True
        return page

    return middleware


def signed_out_parts(get_response):
    """Sends the whole page to the sign-in form when a part it asks for (a poll, a button) meets the
    redirect to sign in: the session ended, in another tab or by expiry.

    The browser follows such a redirect itself, and htmx swapped the sign-in page, header and all, into
    every live part of the page, whose polls then stopped. Answered instead with HX-Redirect to the sign-in
    form, which comes back to the page (HX-Current-URL), not to the part.
    """
    login = resolve_url(settings.LOGIN_URL)

    def middleware(request):
        response = get_response(request)
        if response.status_code not in (301, 302) or not getattr(request, "htmx", False):
            return response
        if urlsplit(response.get("Location", "")).path != login:
            return response
        page = request.htmx.current_url_abs_path or "/"
        return HttpResponseClientRedirect(f"{login}?{urlencode({'next': page})}")

    return middleware


class ProductErrorPages:
    """The portal's own 400, 404 and 500 pages under DEBUG, where Django answers with its debug pages (the URLs
    tried, a traceback): set when DEBUG_ERROR_PAGES is off (`make demo`), with `product_bad_host_page` first.
    Last in MIDDLEWARE, so that every other middleware has seen the request (the page shows who is signed in)
    and CommonMiddleware still redirects an address missing its slash.

    An address no URL matches fails before any view, where no middleware sees it: it is resolved here first.
    An error a view raises is logged with its traceback, as Django logs it, and answered by the 500 handler;
    a request a view refuses (BadRequest, SuspiciousOperation) by the 400 handler, logged as Django logs it;
    a 403 keeps Django's answer, which is the portal's page in debug too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            resolve(request.path_info, getattr(request, "urlconf", None))
        except Resolver404 as error:
            return not_found(request, error)
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, Http404):
            return not_found(request, exception)
        if isinstance(exception, PermissionDenied):
            return None
        if isinstance(exception, (BadRequest, SuspiciousOperation)):
            return _refused(request, exception)
        response = server_error(request)
        log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request,
                     exception=exception)  # fmt: skip
        return response


def product_bad_host_page(get_response):
    """The portal's 400 (JSON under /api/) for a Host header not in ALLOWED_HOSTS under DEBUG, where Django answers
    with its debug page; set with ProductErrorPages when DEBUG_ERROR_PAGES is off (`make demo`). First in
    MIDDLEWARE: the error of the middleware that reads the host first (CommonMiddleware) is answered by Django
    before any other middleware sees it, so the host is read here before."""

    def middleware(request):
        try:
            request.get_host()
        except DisallowedHost as error:
            return _refused(request, error)
        return get_response(request)

    return middleware


def _refused(request, exception: BadRequest | SuspiciousOperation):
    """The 400 handler's answer to a refused request, logged as Django logs it outside debug: a suspicious one to
    `django.security.<its class>`, any other to `django.request`."""
    response = bad_request(request, exception)
    if isinstance(exception, SuspiciousOperation):
        log_response(str(exception), exception=exception, request=request, response=response, level="error",
                     logger=logging.getLogger(f"django.security.{type(exception).__name__}"))  # fmt: skip
    else:
        log_response("%s: %s", str(exception), request.path, response=response, request=request, exception=exception)
    return response
