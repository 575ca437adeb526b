from django.urls import path

from jobs import sweep_views, views

app_name = "jobs"
urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.submit, name="submit"),
    path("new/preview/", views.preview, name="preview"),
    path("new/import/", views.import_yaml, name="import"),
    path("<int:job_id>/", views.detail, name="detail"),
    path("<int:job_id>/cancel/", views.cancel, name="cancel"),
    path("<int:job_id>/logs/", views.logs, name="logs"),
    path("<int:job_id>/logs/<slug:replica>.log", views.log_download, name="log-download"),
    path("sweeps/<int:sweep_id>/", sweep_views.sweep_detail, name="sweep"),
]
