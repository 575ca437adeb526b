"""Requests refused before any view: a URL carrying text no name, slug or id can hold."""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import render

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
