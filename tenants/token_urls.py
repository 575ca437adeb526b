from django.urls import path

from tenants import token_views

app_name = "tokens"
urlpatterns = [
    path("", token_views.my_tokens, name="mine"),
    path("<int:token_id>/revoke/", token_views.my_token_revoke, name="revoke"),
]
