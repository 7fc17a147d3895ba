import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings")
application = get_wsgi_application()
# Import every view now, so workers forked by `gunicorn --preload` share it instead of each paying on
# its first request.
get_resolver().url_patterns  # noqa: B018
