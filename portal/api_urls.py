"""URLs of the REST API (/api/v1/) and its OpenAPI schema with Swagger UI and Redoc (served offline)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from jobs.api import JobViewSet, QueueView
from scheduling.api import ClusterView
from tenants.api import TeamViewSet, UserTokenViewSet

app_name = "api"

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("teams", TeamViewSet, basename="team")
router.register("tokens", UserTokenViewSet, basename="token")

urlpatterns = [
    path("v1/", include(router.urls)),
    path("v1/queue/", QueueView.as_view(), name="queue"),
    path("v1/cluster/", ClusterView.as_view(), name="cluster"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("schema/swagger/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="swagger"),
    path("schema/redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]
