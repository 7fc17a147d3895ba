import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings")
application = get_wsgi_application()
# Import every view now, so workers forked by `gunicorn --preload` share it instead of each paying on
# its first request.
get_resolver().url_patterns  # noqa: B018
# What is loaded so far (Django, the apps, every view) lives as long as the process: keep it out of the
# collector's full passes, which then scan only what requests create. A cold "my workloads" render builds
# tens of thousands of engine objects; the full collection it triggered took 70-85 ms over the whole heap,
# 5-6 ms with the startup objects frozen (docs/performance.md).
gc.collect()
gc.freeze()
