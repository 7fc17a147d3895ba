"""Sign-in: how long a locked-out caller must wait (django-axes counts the failures)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.helpers import get_cool_off
from django.utils import timezone
from django.utils.timesince import timeuntil

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
        head = "Too many failed sign-ins for this account or from this address: sign-in is locked"
        if self.until is None:
            return f"{head}; {ASK_AN_ADMIN}."
        at = timezone.localtime(self.until).strftime("%H:%M %Z")
        return f"{head} until {at} (in {timeuntil(self.until)}); try again then, or {ASK_AN_ADMIN}."


def lockout_for(request) -> Lockout:
    """The lockout a refused attempt just met. Every attempt made while locked out starts the cool-off
    again (axes' AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT), so it ends a whole cool-off from now."""
    cool_off: timedelta | None = get_cool_off(request)
    return Lockout(timezone.now() + cool_off if cool_off else None)
