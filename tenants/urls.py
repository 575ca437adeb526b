from django.urls import path

from tenants import views

app_name = "tenants"
urlpatterns = [
    path("", views.team_list, name="list"),
    path("<slug:slug>/", views.team_detail, name="detail"),
    path("<slug:slug>/quota/", views.quota_edit, name="quota"),
]
