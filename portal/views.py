"""Project-wide views: health, and the error pages in the site's style."""

from django.http import JsonResponse
from django.shortcuts import render
from django.template import loader
from django.http import HttpResponseServerError


def healthz(request):
    """The process is alive (it answers); readiness lives at /readyz."""
    return JsonResponse({"status": "ok"})


def forbidden(request, exception=None):
    return render(request, "403.html", {"message": _message(exception)}, status=403)


def not_found(request, exception=None):
    return render(request, "404.html", {"message": _message(exception)}, status=404)


def server_error(request):
    """Rendered without the request context: whatever broke may be in it (a context processor, the session).
    Under /api/ a JSON body in DRF's shape, which clients of the API read (the CLI shows its detail)."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "The server failed to answer this request; the error is in its log."},
                            status=500)  # fmt: skip
    return HttpResponseServerError(loader.get_template("500.html").render())


def _message(exception) -> str:
    """The exception's sentence when it was written for a person, else nothing."""
    text = str(exception or "")
    return text if text and not text.startswith(("{", "<", "Resolver404")) and " " in text else ""
