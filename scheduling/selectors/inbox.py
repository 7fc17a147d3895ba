"""Reads of the in-portal inbox: always the asking user's own rows."""

from django.db.models import QuerySet

from scheduling.models import Notification


def messages_of(user, *, unread_only: bool = False) -> QuerySet:
    rows = Notification.objects.filter(recipient_id=user.pk)
    if unread_only:
        rows = rows.filter(read_at__isnull=True)
    return rows.order_by("-created_at", "-pk")


def unread_count(user) -> int:
    if not user.is_authenticated:
        return 0
    return Notification.objects.filter(recipient_id=user.pk, read_at__isnull=True).count()
