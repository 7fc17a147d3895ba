"""gunicorn settings, read from the working directory by `gunicorn gpuportal.wsgi` (compose, load benchmark).

Threaded workers keep HTTP connections alive: a sync worker closes the connection after every response,
so each API call of a script or dashboard pays a new TCP connection on both ends (measured in
benchmarks/api_load.py). The views wait on PostgreSQL, so a few threads per process fill that wait.
Override on the command line (-w, --threads, -k) or with GUNICORN_THREADS / WEB_CONCURRENCY.
"""

import os

worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE_S", "30"))
