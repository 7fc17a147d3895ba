"""Issue 16, the demo: demo_setup creates admin/admin, so it runs only when told the database is a demo."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from scheduling.models import QuotaGrant, QuotaRequest

pytestmark = pytest.mark.django_db


def test_demo_setup_refuses_without_being_told_this_is_a_demo_even_with_debug_on(settings):
    settings.DEBUG = True
    with pytest.raises(CommandError, match="--i-know-this-is-a-demo or GPUPORTAL_DEMO=1"):
        call_command("demo_setup", "--history-days", "0.05")
    assert not get_user_model().objects.exists()


def test_demo_setup_runs_with_the_flag_or_the_setting(settings, capsys):
    call_command("demo_setup", "--i-know-this-is-a-demo", "--history-days", "0.05")
    assert get_user_model().objects.get(username="admin").is_superuser
    QuotaGrant.objects.all().delete()  # the demo's grants and requests protect their people
    QuotaRequest.objects.all().delete()
    get_user_model().objects.all().delete()
    settings.GPUPORTAL_DEMO = True
    call_command("demo_setup", "--history-days", "0.05")
    assert "admin / admin" in capsys.readouterr().out


def test_make_demo_tells_demo_setup_that_it_is_a_demo():
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "manage.py demo_setup --i-know-this-is-a-demo" in makefile
