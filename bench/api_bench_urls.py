"""The portal's URLs plus the benchmark's floor: the least an authenticated DRF write can cost.

Same authentication (token), permission and throttling as the API; one row
written; no validation, no policy.
"""

from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import AuditEntry


class FloorView(APIView):
    def post(self, request):
        entry = AuditEntry.objects.create(subject="bench", summary="floor")
        return Response({"id": entry.pk}, status=201)


urlpatterns = [path("bench/floor/", FloorView.as_view()), path("", include("portal.urls"))]
