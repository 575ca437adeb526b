from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from portal import views
from portal.health import readyz
from portal.metrics import metrics

# The admin's pages carry the portal's name, as the portal's own do ("Quotas · Gangway"), not Django's.
admin.site.site_header = "Gangway administration"
admin.site.site_title = "Gangway admin"

urlpatterns = [
    path("", include("scheduling.urls")),
    path("jobs/", include("jobs.urls")),
    path("teams/", include("tenants.urls")),
    path("tokens/", include("tenants.token_urls")),
    path("notifications/", include("notifications.urls")),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg")), name="favicon"),  # the admin's pages ask
    path("admin/", admin.site.urls),
    path("api/", include("portal.api_urls")),
    path("oidc/", include("tenants.identity_urls")),
]

handler400 = "portal.views.bad_request"
handler403 = "portal.views.forbidden"
handler404 = "portal.views.not_found"
handler500 = "portal.views.server_error"
