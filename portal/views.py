"""Project-wide views: health, and the error pages in the site's style."""

import sys

from django.core.exceptions import DisallowedHost
from django.http import JsonResponse
from django.shortcuts import render
from django.template import loader
from django.urls import reverse
from django.http import HttpResponseServerError
from django.views import defaults

from portal.api_errors import RETRY_AFTER, database_unavailable


def healthz(request):
    """The process is alive (it answers); readiness lives at /readyz."""
    return JsonResponse({"status": "ok"})


def bad_request(request, exception=None):
    """Django's 400 page for a request refused outside a view (a SuspiciousOperation such as a Host header not in
    ALLOWED_HOSTS, a session the session middleware could not save). Under /api/ a JSON body in DRF's shape, as
    the API answers everywhere else; a session unsaved because the database is out of service for a while is the
    API's 503 with Retry-After (`portal.api_errors`), not the client's mistake."""
    if request.path_info.startswith("/api/"):
        unavailable = database_unavailable(exception)
        if unavailable:
            return JsonResponse({"detail": unavailable}, status=503, headers=RETRY_AFTER)
        return JsonResponse({"detail": _refused(exception)}, status=400)
    return defaults.bad_request(request, exception)


def forbidden(request, exception=None):
    return render(request, "403.html", {"message": _message(exception)}, status=403)


# Where a person signed in looks next for what an address asked for and did not find, by the address's URL name,
# else its namespace: a job in their list, a team in the list of teams, a sweep on its team's page (which the
# sweep not found cannot name). An address no URL matches asks for nothing in particular: they check it.
LOOK_NEXT = {
    "jobs:sweep": ("find the sweep on its team's page", "tenants:list", "Teams"),
    "jobs": ("find the job in your list", "jobs:list", "My jobs"),
    "tenants": ("find the team in the list of teams", "tenants:list", "Teams"),
    "notifications": ("find the team in the list of teams", "tenants:list", "Teams"),
    "tokens": ("find the token in your list of tokens", "tokens:mine", "My tokens"),
}


def not_found(request, exception=None):
    """The 404 page, saying what fits what was asked for and who asks: a visitor signed out is asked to sign in
    (what a team holds shows only to its people); a person signed in is told where to look next (`LOOK_NEXT`)."""
    context = {"message": _message(exception), "signed_out": not _signed_in(request)}
    match = getattr(request, "resolver_match", None)
    step = match and (LOOK_NEXT.get(match.view_name) or LOOK_NEXT.get(match.namespace))
    if step and not context["signed_out"]:
        context.update(look_next=step[0], next_url=reverse(step[1]), next_label=step[2])
    return render(request, "404.html", context, status=404)


def not_allowed(request, allowed: str):
    """The 405 page for an address that takes a form's post (a button's), opened instead: one sentence and a
    link back to what the form was on, the job's page for a job's action; `allowed` is its Allow header."""
    kwargs = getattr(getattr(request, "resolver_match", None), "kwargs", {})
    back = None
    if "job_id" in kwargs:
        back = (reverse("jobs:detail", args=[kwargs["job_id"]]), "Back to the job", "the job's page")
    elif "slug" in kwargs:
        back = (reverse("tenants:detail", args=[kwargs["slug"]]), "Back to the team", "the team's pages")
    response = render(request, "405.html", {"back": back}, status=405)
    response["Allow"] = allowed
    return response


def _signed_in(request) -> bool:
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated)


def server_error(request):
    """Rendered without the request context: whatever broke may be in it (a context processor, the session).
    Under /api/ a JSON body in DRF's shape, which clients of the API read (the CLI shows its detail); for a
    database out of service for a while, the 503 with Retry-After that an API view answers itself
    (`portal.api_errors`). Django calls this, inside its handling of the exception, for what was raised
    outside a view's own handling: in a middleware, or while the browsable API renders its page (whose
    context processors read the database)."""
    if request.path_info.startswith("/api/"):
        unavailable = database_unavailable(sys.exception())
        if unavailable:
            return JsonResponse({"detail": unavailable}, status=503, headers=RETRY_AFTER)
        return JsonResponse({"detail": "The server failed to answer this request; the error is in its log."},
                            status=500)  # fmt: skip
    return HttpResponseServerError(loader.get_template("500.html").render())


def _refused(exception) -> str:
    """The API's sentence for a request refused before any view: the exception's own text is for the log (a bad
    Host's names the setting to change), not for whoever sent it."""
    if isinstance(exception, DisallowedHost):
        return "The request's Host header names an address this server does not answer to; use the portal's address."
    return "The request was refused before the API read it: it was malformed."


def _message(exception) -> str:
    """The exception's sentence when it was written for a person, else nothing."""
    text = str(exception or "")
    return text if text and not text.startswith(("{", "<", "Resolver404")) and " " in text else ""
