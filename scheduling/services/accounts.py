"""Sign-in: how long a locked-out caller must wait (django-axes counts the failures), and what a password
change does to the account's API tokens."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.db.models import Max
from django.utils import timezone
from django.utils.timesince import timeuntil
from knox.models import get_token_model

ASK_AN_ADMIN = "ask a portal admin to unlock it"


@dataclass(frozen=True)
class Lockout:
    """A locked-out sign-in: until when (``None``: until an admin unlocks it)."""

    until: datetime | None

    @property
    def retry_after_s(self) -> int | None:
        if self.until is None:
            return None
        return max(1, round((self.until - timezone.now()).total_seconds()))

    @property
    def message(self) -> str:
        head = "Too many failed sign-ins for this account: sign-in is locked"
        if self.until is None:
            return f"{head}; {ASK_AN_ADMIN}."
        at = timezone.localtime(self.until).strftime("%H:%M %Z")
        return f"{head} until {at} (in {timeuntil(self.until)}); try again then, or {ASK_AN_ADMIN}."


def lockout_for(request) -> Lockout:
    """The lockout a refused attempt just met: a cool-off after the account's last counted failure. Guesses
    made while locked out are not counted (AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT off), so they do not
    move its end."""
    cool_off: timedelta | None = get_cool_off(request)
    if not cool_off:
        return Lockout(None)
    username = get_client_username(request, getattr(request, "axes_credentials", None))
    last = AccessAttempt.objects.filter(username=username).aggregate(last=Max("attempt_time"))["last"]
    return Lockout((last or timezone.now()) + cool_off)


def revoke_api_tokens(user) -> int:
    """Delete every API token of ``user``; how many there were."""
    deleted, _ = get_token_model().objects.filter(user=user).delete()
    return deleted


class RevokeApiTokensOnPasswordChange:
    """Listed in AUTH_PASSWORD_VALIDATORS for Django's ``password_changed`` hook, which runs after every
    save that follows ``set_password``: the password-change page, the admin's set-password form,
    ``changepassword``, a password reset. A new password must shut out whoever learnt the old one, and
    a token they made with it would outlive it by up to API_TOKEN_TTL_DAYS. It validates nothing.

    The count is left on the user (``revoked_api_tokens``) for the page that changed it to say so."""

    def validate(self, password, user=None) -> None:
        return None

    def password_changed(self, password, user=None) -> None:
        if user is not None and user.pk is not None:
            user.revoked_api_tokens = revoke_api_tokens(user)

    def get_help_text(self) -> str:
        return "Changing your password revokes every API token of your account."


def tokens_revoked_message(user, whose: str) -> str:
    count = getattr(user, "revoked_api_tokens", 0)
    tokens = f"{count} API token{'s' if count != 1 else ''}"
    return f"{tokens} of {whose} revoked with the old password; a script needs a new one (POST /api/v1/auth/tokens/)."
