"""scheduling/tables.py reads each render function's signature once: the same answers as django-tables2's own."""

import functools

from django_tables2 import utils as tables_utils

from scheduling import tables


class Cells:
    def render(self, value, record):
        return value

    def render_everything(self, **kwargs):
        return kwargs

    def render_rest(self, *args, value):
        return value

    @classmethod
    def render_class(cls, value):
        return value

    def __call__(self, record):
        return record

    __hash__ = None  # an unhashable callable is read each time


def plain(value, bound_column=None, **rest):
    return value


def test_every_kind_of_callable_gets_the_signature_django_tables2_would_read():
    one, two = Cells(), Cells()
    callables = [
        one.render, two.render, Cells.render, one.render_everything, one.render_rest, Cells.render_class,
        one, plain, lambda record: record, functools.partial(plain, bound_column=None),
    ]  # fmt: skip
    assert tables_utils.signature is tables._signature
    for fn in callables * 2:  # the second pass answers from the memo
        assert tables._signature(fn) == tables._read_signature(fn), fn
    assert tables._signature(one.render) == (("value", "record"), None)
    assert tables._signature(Cells.render) == (("self", "value", "record"), None)  # unbound keeps self
    assert tables._signature(one.render_rest) == (("value",), None)
