from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render


@login_required
def home(request):
    return render(request, "home.html")


def healthz(request):
    """The process is alive (it answers); readiness lives at /readyz."""
    return JsonResponse({"status": "ok"})
