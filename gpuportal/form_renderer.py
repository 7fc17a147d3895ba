"""Django's form renderer with ``<select>`` drawn in Python, markup for markup as Django's own templates.

Django's ``select.html`` includes ``select_option.html`` (which includes ``attrs.html``) once per option: a
page's filters with a 50-team select spent ~12 ms of CPU there, a third of the team list's render. Every
other widget renders through Django's templates as before.
"""

from django.forms.renderers import DjangoTemplates
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

SELECT_TEMPLATE = "django/forms/widgets/select.html"


def _attrs(attrs: dict) -> SafeString:
    """``attrs.html``: `` name="value"``, a bare `` name`` for True, nothing for False."""
    shown = ((name, "" if value is True else format_html('="{}"', value)) for name, value in attrs.items())
    return format_html_join("", " {}{}", ((name, value) for name, value in shown if attrs[name] is not False))


def _options(choices: list[dict]) -> SafeString:
    rows = ((o["value"], _attrs(o["attrs"]), o["label"]) for o in choices)
    return format_html_join("", '\n  <option value="{}"{}>{}</option>', rows)


def render_select(widget: dict) -> SafeString:
    """``select.html`` (Select, NullBooleanSelect, SelectMultiple): options, in optgroups where there are any."""
    group = '\n  <optgroup label="{}">{}\n  </optgroup>'
    groups = (
        format_html(group, name, _options(choices)) if name else _options(choices)
        for name, choices, _index in widget["optgroups"]
    )
    options = format_html_join("", "{}", ((group,) for group in groups))
    return format_html('<select name="{}"{}>{}\n</select>', widget["name"], _attrs(widget["attrs"]), options)


class PortalFormRenderer(DjangoTemplates):
    def render(self, template_name, context, request=None):
        if template_name == SELECT_TEMPLATE:
            return render_select(context["widget"])
        return super().render(template_name, context, request)
