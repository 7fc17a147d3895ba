"""Account pages of our own: the lockout page (django-axes calls ``locked_out``) and the password change,
which says that the account's API tokens went with the old password."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
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
