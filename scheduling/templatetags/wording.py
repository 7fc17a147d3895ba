"""``{{ team.name|possessive }}``: "Recommendation models' team page" (scheduling/wording.py)."""

from django import template

from scheduling.wording import possessive as possessive_of

register = template.Library()


@register.filter
def possessive(name: object) -> str:
    return possessive_of(str(name))
