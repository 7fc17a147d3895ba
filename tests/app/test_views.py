import re

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.services import demo

pytestmark = pytest.mark.django_db


@pytest.fixture
def federation():
    demo.create_demo_federation()
    demo.fill_history(days=0.1, step_s=600)


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(reverse("overview"))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_the_overview_shows_the_fleets_real_numbers(client, federation, django_user_model):
    from scheduling.models import Node

    client.force_login(django_user_model.objects.get(username="alice"))
    body = client.get(reverse("overview")).content.decode()
    total = sum(Node.objects.values_list("gpu_total", flat=True))
    allocated = sum(Node.objects.values_list("gpu_allocated", flat=True))
    assert re.search(rf'id="kpi-gpus-total">{total}<', body)
    assert re.search(rf'id="kpi-gpus-allocated">{allocated}<', body)
    assert "plotly-cartesian" in body and "js/charts.js" in body and 'class="plot" data-figure="' in body
    for name in ("slurm-hpc", "k8s-serving", "ray-sweeps"):
        assert name in body


def test_a_failing_source_shows_a_stale_banner_with_its_error_for_admins(client, federation, django_user_model):
    from scheduling.models import Orchestrator

    Orchestrator.objects.filter(name="ray-sweeps").update(last_error="connect timeout", last_error_at=timezone.now())
    client.force_login(django_user_model.objects.get(username="bob"))
    body = client.get(reverse("overview")).content.decode()
    assert "Stale data from" in body and "ray-sweeps" in body and "connect timeout" not in body
    client.force_login(django_user_model.objects.get(username="admin"))
    assert "connect timeout" in client.get(reverse("overview")).content.decode()


def test_plotly_is_served_offline_as_the_partial_bundle_of_the_wheels_plotly_js_version(client):
    """The figures come from the plotly wheel's schema: the vendored bundle must be the same plotly.js."""
    import plotly.offline

    version = plotly.offline.get_plotlyjs_version()
    response = client.get(f"/static/vendor/plotly/plotly-cartesian-{version}.min.js")
    assert response.status_code == 200
    assert f"plotly.js (cartesian - minified) v{version}".encode() in b"".join(response.streaming_content)[:2000]
