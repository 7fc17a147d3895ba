"""gunicorn settings for the production stack (docker-compose, benchmarks/api_load.py).

gunicorn reads ``./gunicorn.conf.py`` from its working directory by default; compose names it anyway.
Command-line options (``-b``, ``-w``) still win over what is set here.
"""

import gunicorn.http.wsgi


def on_starting(server) -> None:
    """Drop the ``Server: gunicorn`` response header (a scanner's first hint at which exploits to try).

    gunicorn has no option for it: every response starts with the lines of ``Response.default_headers``,
    ``Server`` among them. The master runs this hook before it forks any worker, so each worker inherits
    the filtered method.
    """
    response = gunicorn.http.wsgi.Response
    original = response.default_headers

    def default_headers(self):
        return [line for line in original(self) if not line.lower().startswith("server:")]

    response.default_headers = default_headers
