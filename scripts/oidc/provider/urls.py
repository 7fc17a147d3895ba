from django.contrib.auth.views import LoginView
from django.http import HttpResponse
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view(template_name="login.html"), name="login"),
    # Chromium asks every host for one; a 404 would be a console error in the browser test.
    path("favicon.ico", lambda request: HttpResponse(status=204)),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
