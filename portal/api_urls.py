"""URLs of the REST API (/api/v1/) and its OpenAPI schema with Swagger UI and Redoc (served offline)."""

from django.urls import Resolver404, include, path, re_path, resolve
from drf_spectacular.utils import extend_schema
from csp.decorators import csp_update
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.decorators import api_view, authentication_classes, permission_classes, throttle_classes
from rest_framework.exceptions import NotFound
from rest_framework.routers import SimpleRouter

from jobs.api import JobCheckpointView, JobViewSet, QueueView
from portal.api_docs import RedocView, redoc_bundle
from scheduling.api import ClusterView
from tenants.api import TeamViewSet, UserTokenViewSet

app_name = "api"

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("teams", TeamViewSet, basename="team")
router.register("tokens", UserTokenViewSet, basename="token")


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@authentication_classes([])
@permission_classes([])
@throttle_classes([])
def no_such_endpoint(request, rest=""):
    """JSON 404 for any other path under /api/, so API clients never get the portal's HTML error page."""
    hint = "see /api/schema/swagger/ for the endpoints."
    if not request.path.endswith("/"):
        try:
            if resolve(request.path + "/").func is not no_such_endpoint:  # the catch-all matches any path
                hint = f"did you mean {request.path}/ (with the trailing slash)?"
        except Resolver404:
            pass
    raise NotFound(f"No API endpoint at {request.path}; {hint}")


# Redoc searches in a web worker it starts from a blob: URL.
_docs_csp = csp_update({"style-src": ["'unsafe-inline'"], "img-src": ["data:"], "worker-src": ["blob:"]})

urlpatterns = [
    path("v1/jobs/<int:job_id>/checkpoint/", JobCheckpointView.as_view(), name="job-checkpoint"),
    path("v1/", include(router.urls)),
    path("v1/queue/", QueueView.as_view(), name="queue"),
    path("v1/cluster/", ClusterView.as_view(), name="cluster"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The documentation UIs style themselves with style elements; only their pages allow inline styles.
    # The Swagger UI's start-up script is served as a file (the split view), so no page needs an inline script.
    path("schema/swagger/", _docs_csp(SpectacularSwaggerSplitView.as_view(url_name="api:schema")), name="swagger"),
    path("schema/redoc/", _docs_csp(RedocView.as_view(url_name="api:schema")), name="redoc"),
    path("schema/redoc/redoc.standalone.js", redoc_bundle, name="redoc-bundle"),
    re_path(r"^(?P<rest>[\s\S]*)$", no_such_endpoint),  # any path, a newline in it too
]
