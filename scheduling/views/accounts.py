"""Account pages of our own: the lockout page (django-axes calls ``locked_out``) and the password change,
which says that the account's API tokens went with the old password."""

from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling.services import accounts


def locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the lockout in the site's layout; 429 with Retry-After while it cools off,
    403 when only an admin can unlock it."""
    lockout = accounts.lockout_for(request)
    status = 403 if lockout.until is None else 429
    response = render(request, "registration/locked_out.html", {"lockout": lockout}, status=status)
    if lockout.retry_after_s is not None:
        response["Retry-After"] = str(lockout.retry_after_s)
    return response


class PasswordChangeView(auth_views.PasswordChangeView):
    def form_valid(self, form):
        response = super().form_valid(form)  # saves: the password_changed hook revokes the tokens
        messages.success(self.request, accounts.tokens_revoked_message(form.user, "your account"))
        return response


def oidc_sign_in_enabled() -> bool:
    return bool(settings.OIDC_RP_CLIENT_ID)


def only_with_oidc(view):
    """mozilla-django-oidc's views answer 404 while OIDC sign-in is off (GPUPORTAL_OIDC_CLIENT_ID unset),
    read at each request, instead of failing on the provider settings they would lack."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not oidc_sign_in_enabled():
            raise Http404("OIDC sign-in is off (GPUPORTAL_OIDC_CLIENT_ID is not set).")
        return view(request, *args, **kwargs)

    return guarded


class LoginView(auth_views.LoginView):
    """Django's sign-in form (local and LDAP accounts), with the provider's button when OIDC is on."""

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "oidc_sign_in": oidc_sign_in_enabled()}
