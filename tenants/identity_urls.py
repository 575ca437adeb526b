"""The SSO login and callback URLs (answer 404 until OIDC_RP_CLIENT_ID is set)."""

from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from tenants.identity import when_sso_enabled

urlpatterns = [
    path("authenticate/", when_sso_enabled(OIDCAuthenticationRequestView.as_view()), name="oidc_authentication_init"),
    path("callback/", when_sso_enabled(OIDCAuthenticationCallbackView.as_view()), name="oidc_authentication_callback"),
]
