from django.contrib import admin
from django.urls import include, path

from scheduling.api.admission import mutate
from scheduling.api.metrics import metrics_view
from scheduling.api.views import health
from scheduling.views.accounts import PasswordChangeView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("scheduling.api.urls")),
    path("admission/v1/mutate", mutate, name="admission-mutate"),
    path("metrics", metrics_view, name="metrics"),
    path("health", health, name="health"),
    path("", include("scheduling.urls")),
]
