"""``{{ team.name|possessive }}``: "Recommendation models' team page"; ``{{ error|labelled:field.label }}``:
a field's error naming the field once (scheduling/wording.py)."""

from django import template

from scheduling.wording import labelled as labelled_message
from scheduling.wording import possessive as possessive_of

register = template.Library()


@register.filter
def possessive(name: object) -> str:
    return possessive_of(str(name))


@register.filter
def labelled(message: object, label: object) -> str:
    return labelled_message(str(label or ""), str(message))
