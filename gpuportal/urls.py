from django.contrib import admin
from django.urls import include, path
from mozilla_django_oidc import views as oidc

from scheduling.api.metrics import metrics_view
from scheduling.api.views import health
from scheduling.views.accounts import LoginView, PasswordChangeView, only_with_oidc

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    # OIDC sign-in (docs/identity.md): 404 unless GPUPORTAL_OIDC_CLIENT_ID is set
    path(
        "oidc/authenticate/",
        only_with_oidc(oidc.OIDCAuthenticationRequestView.as_view()),
        name="oidc_authentication_init",
    ),
    path(
        "oidc/callback/",
        only_with_oidc(oidc.OIDCAuthenticationCallbackView.as_view()),
        name="oidc_authentication_callback",
    ),
    path("api/", include("scheduling.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("health", health, name="health"),
    path("", include("scheduling.urls")),
]
