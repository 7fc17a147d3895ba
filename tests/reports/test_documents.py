"""The report as documents: the PDF opens and has every section (pdftotext), HTML and CSV carry the figures."""

import csv
import io
import shutil
import subprocess

import pytest

from scheduling.reports import documents as reports
from scheduling.reports.capacity import SECTIONS
from scheduling.services.report_delivery import report_content
from tests.support import require

from .conftest import WEEK

pytestmark = pytest.mark.django_db


@pytest.fixture
def content(week):
    return report_content(WEEK)


def test_the_pdf_opens_and_has_every_section_heading(content, tmp_path):
    require(shutil.which("pdftotext") is not None, "needs pdftotext (apt-get install poppler-utils)")
    pdf = reports.render_pdf(content, None)
    assert pdf.startswith(b"%PDF-")
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout
    for section in SECTIONS:
        assert section.title in text
    assert "Weekly capacity report" in text and "slurm-a" in text


def test_the_html_draws_its_charts_as_inline_svg_without_scripts(content):
    html = reports.render_html(content, None)
    assert html.count("<svg") == 3
    assert "<script" not in html
    assert "10736.00" in html  # slurm-a capacity GPU-hours


def test_the_csv_has_one_figure_per_row_with_its_unit(content):
    rows = list(csv.DictReader(io.StringIO(reports.render_csv(content, None))))
    capacity = {r["metric"]: r for r in rows if r["section"] == "capacity" and r["row"] == "slurm-a"}
    assert float(capacity["capacity_h"]["value"]) == pytest.approx(10736)
    assert capacity["capacity_h"]["unit"] == "GPU-hours"
    assert any(r["section"] == "top_users" and r["row"] == "research/leo" for r in rows)


def test_readers_outside_a_team_lead_see_no_per_user_rows_of_it(content):
    scoped = reports.visible_content(content, frozenset({"nlp"}))
    tops = {t["slug"]: t["top_users"] for t in scoped["sections"]["teams"]["teams"]}
    assert tops["research"] == [] and tops["production"] == []
    assert [u["user"] for u in tops["nlp"]] == ["rita"]
    assert "leo" not in reports.render_csv(content, frozenset({"nlp"}))
