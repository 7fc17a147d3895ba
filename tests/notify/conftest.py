from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.services import quota
from tests.notify.chat_server import ChatRoom


@pytest.fixture
def room():
    chat = ChatRoom()
    yield chat
    chat.close()


@pytest.fixture
def eager(settings):
    """Celery runs a published task at once, here, retries included (their countdown is not waited)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    import scheduling.tasks  # noqa: F401 - registers post_chat_message (a named signature of an unknown task is sent)


def submit(cast, teams, capture, justification: str = "ICML deadline"):
    """rita's request for 8 GPUs for nlp, submitted and committed (its messages sent)."""
    start = timezone.now() + timedelta(hours=1)
    with capture(execute=True):
        return quota.create_request(
            requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start,
            ends_at=start + timedelta(days=1), justification=justification,
        )
