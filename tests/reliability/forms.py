"""Read a form's fields out of a page as a browser would post them (hidden fields included)."""

from html.parser import HTMLParser


class _FormFields(HTMLParser):
    def __init__(self, form_id: str | None, containing: str | None):
        super().__init__()
        self.form_id, self.containing = form_id, containing
        self.forms: list[dict[str, str]] = []
        self._open = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._open = True
            self.forms.append({"__id__": attrs.get("id") or ""})
        elif tag == "input" and self._open and attrs.get("name") and attrs.get("type") not in ("submit", "button"):
            self.forms[-1][attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._open = False


def form_fields(
    html: str, *, form_id: str | None = None, having: str | None = None, where: dict[str, str] | None = None
) -> dict[str, str]:
    """The inputs of the page's form with ``form_id``, or of the first form with an input named ``having`` (and
    the input values ``where`` names, e.g. the hidden pk of one plan among several)."""
    parser = _FormFields(form_id, having)
    parser.feed(html)
    for form in parser.forms:
        matches = all(form.get(name) == value for name, value in (where or {}).items())
        if matches and ((form_id and form["__id__"] == form_id) or (having and having in form)):
            return {name: value for name, value in form.items() if name != "__id__"}
    raise AssertionError(f"no form {form_id or having!r} on the page")
