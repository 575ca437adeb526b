from django.urls import path

from tenants import token_views, views

app_name = "tenants"
urlpatterns = [
    path("", views.team_list, name="list"),
    path("<slug:slug>/", views.team_detail, name="detail"),
    path("<slug:slug>/quota/", views.quota_edit, name="quota"),
    path("<slug:slug>/tokens/", token_views.team_tokens, name="tokens"),
    path("<slug:slug>/tokens/<int:token_id>/revoke/", token_views.team_token_revoke, name="token-revoke"),
]
