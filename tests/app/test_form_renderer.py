"""The portal draws <select> in Python (gpuportal/form_renderer.py): the same elements, attributes, escaping
and selection as Django's own templates, for every kind of select, up to the blank lines between options."""

import re

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates

from gpuportal.form_renderer import PortalFormRenderer


class Everything(forms.Form):
    plain = forms.ChoiceField(choices=[("", "—"), ("x<", "X & y"), ("2", "Two")], required=False)
    yes_no = forms.NullBooleanField()
    many = forms.MultipleChoiceField(choices=[("p", "P"), ("Group <1>", [("q", "Q"), ("r", "R")])])
    attrs = forms.ChoiceField(
        choices=[("G1", [("1", "one")]), ("2", "two")],
        widget=forms.Select(attrs={"data-x": True, "aria-invalid": False, "class": 'a"b'}),
    )


def _blank_lines_out(html: str) -> str:
    return re.sub(r"\n\s*\n", "\n", html)


@pytest.mark.parametrize("name", ["plain", "yes_no", "many", "attrs"])
def test_a_select_is_drawn_as_djangos_templates_draw_it(name):
    form = Everything({"plain": "x<", "yes_no": "true", "many": ["q", "r"], "attrs": "1"})
    form.renderer = DjangoTemplates()
    django_drawn = form[name].as_widget()
    form.renderer = PortalFormRenderer()
    ours = form[name].as_widget()
    assert ours == _blank_lines_out(str(django_drawn)) and "<option" in ours


def test_the_portal_uses_it(settings):
    assert settings.FORM_RENDERER == "gpuportal.form_renderer.PortalFormRenderer"
