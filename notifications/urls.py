from django.urls import path

from notifications import views

app_name = "notifications"
urlpatterns = [
    path("", views.settings_page, name="settings"),
    path("webhooks/<slug:slug>/", views.webhook, name="webhook"),
]
