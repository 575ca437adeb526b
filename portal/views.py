"""Project-wide views: health, and the error pages in the site's style."""

import sys

from django.core.exceptions import DisallowedHost
from django.http import JsonResponse
from django.shortcuts import render
from django.template import loader
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


def not_found(request, exception=None):
    return render(request, "404.html", {"message": _message(exception)}, status=404)


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
