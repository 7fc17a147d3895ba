"""Every table downloads as CSV: all its rows (not one page), with the page's filters and order, and a
cell a spreadsheet would run as a formula kept as text."""

import csv
import io

import pytest
from django.urls import reverse

from scheduling.models import Queue, QuotaRequest, Team

pytestmark = pytest.mark.django_db


def _rows(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_a_table_downloads_every_row_as_csv_with_the_pages_filters(client, cast, teams, period):
    start, end = period
    for n in range(30):  # more than one page of 25
        QuotaRequest.objects.create(
            team=teams["nlp" if n % 2 else "production"], requester=cast["admin"], gpus=n + 1,
            starts_at=start, ends_at=end, justification="x",
        )  # fmt: skip
    client.force_login(cast["admin"])
    page = client.get(reverse("quota-list")).content.decode()
    assert "Download as CSV" in page and "export=csv" in page
    rows = _rows(client.get(reverse("quota-list"), {"export": "csv"}))
    assert len(rows) == 31 and "GPUs" in rows[0]
    nlp = _rows(client.get(reverse("quota-list"), {"export": "csv", "team": "nlp"}))
    assert len(nlp) == 16


def test_a_cell_a_spreadsheet_would_run_stays_text_and_numbers_stay_numbers(client, cast):
    evil = Team.objects.create(slug="evil", name='=HYPERLINK("http://x")')
    Queue.objects.create(team=evil, weight=0, guaranteed=0, burst_limit=1)
    client.force_login(cast["admin"])
    rows = _rows(client.get(reverse("team-list"), {"export": "csv"}))
    cells = [cell for row in rows for cell in row]
    assert '\'=HYPERLINK("http://x")' in cells and not any(c.startswith("=") for c in cells)


def test_an_unknown_export_format_is_a_400_naming_the_parameter(client, cast):
    client.force_login(cast["admin"])
    response = client.get(reverse("quota-list"), {"export": "xlsx"})
    assert response.status_code == 400 and "export" in response.content.decode()
