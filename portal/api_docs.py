"""The Redoc page of the API docs, with its bundle served from here rewritten so it fetches nothing from elsewhere.

Redoc's side menu shows Redocly's logo from their CDN, an address written into the
bundle with no option to leave it out. The portal's Content-Security-Policy refuses
it (an error in the console on every visit), and a cluster's portal may have no way
out at all. The bundle served here names instead an image that is no image: Redoc
drops the logo when it fails to load, and keeps its "API docs by Redocly" link.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpResponse
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularRedocView

BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
NO_IMAGE = "data:,"  # img-src allows data: on the docs pages; an empty one fails to decode, so Redoc hides it
SOURCE_MAP = "//# sourceMappingURL=redoc.standalone.js.map"


@cache
def redoc_bundle_text() -> str:
    """Returns Redoc's bundle from drf-spectacular-sidecar with the logo's address replaced and its source
    map named where the static files serve it; read once per process."""
    text = Path(finders.find(BUNDLE)).read_text(encoding="utf-8")
    return text.replace(REDOCLY_LOGO, NO_IMAGE).replace(SOURCE_MAP, f"//# sourceMappingURL={static(BUNDLE)}.map")


@require_safe
def redoc_bundle(request):
    """Redoc's bundle, the same for everyone (the docs pages need no sign-in)."""
    return HttpResponse(redoc_bundle_text(), content_type="text/javascript; charset=utf-8",
                        headers={"Cache-Control": "public, max-age=3600"})  # fmt: skip


class RedocView(SpectacularRedocView):
    """drf-spectacular's Redoc page, loading the bundle above."""

    @staticmethod
    def _redoc_standalone():
        return reverse("api:redoc-bundle")
