"""The in-portal inbox: a row per recipient for every event the portal tells people of (mail or no mail).

Only the recipient reads or marks a row; another user's id is reported as missing (the view answers 404),
so an id says nothing about whether it exists."""

from collections.abc import Iterable

from django.utils import timezone

from scheduling.models import Notification


def post(people: Iterable, *, kind: str, subject: str, body: str = "", link: str = "") -> int:
    """One unread row per distinct active person; returns how many were written."""
    recipients = {person.pk: person for person in people if person is not None and person.is_active}
    Notification.objects.bulk_create(
        [
            Notification(recipient=person, kind=kind, subject=subject[:300], body=body, link=link[:500])
            for _, person in sorted(recipients.items())
        ]
    )
    return len(recipients)


def _own(user, notification_id: int) -> Notification:
    return Notification.objects.get(pk=notification_id, recipient_id=user.pk)


def mark_read(user, notification_id: int) -> Notification:
    """Mark one of ``user``'s own messages read (Notification.DoesNotExist for anybody else's)."""
    notification = _own(user, notification_id)
    if notification.read_at is None:
        notification.read_at = timezone.now()
        notification.save(update_fields=["read_at"])
    return notification


def mark_unread(user, notification_id: int) -> Notification:
    notification = _own(user, notification_id)
    notification.read_at = None
    notification.save(update_fields=["read_at"])
    return notification


def mark_all_read(user) -> int:
    return Notification.objects.filter(recipient_id=user.pk, read_at__isnull=True).update(read_at=timezone.now())
