from django.contrib import admin
from django.urls import include, path

from scheduling.api.metrics import metrics_view
from scheduling.api.views import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("scheduling.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("health", health, name="health"),
    path("", include("scheduling.urls")),
]
