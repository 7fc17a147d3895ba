"""Capacity report: ``capacity`` composes the week's content from plain reads, ``documents`` renders it (HTML, PDF,
CSV, text, SVG charts). Neither touches the ORM: the reads are ``selectors/report.py``, the storing and sending
``services/report_delivery.py``.
"""
