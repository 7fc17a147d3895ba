# syntax=docker/dockerfile:1
# The portal's production image: web (gunicorn), Celery worker and beat, the migrate step and the admission
# webhook all run this one image with a different command (docker-compose.yml, deploy/k8s/).
# Debian 12 (bookworm) on purpose: its Slurm client is 22.05, the version the live Slurm tests and the
# `scontrol` drains run against. docs/deployment.md explains every choice here.

# ---------------------------------------------------------------------------------------------- build
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# python-ldap (django-auth-ldap's client) is published as source only: it compiles against OpenLDAP's and
# SASL's headers, the ones scripts/ldap/install.sh installs for CI.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libldap-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
COPY requirements.lock /tmp/requirements.lock
# Exactly the pinned, hashed dependency set CI tests (requirements.lock, made by `uv pip compile`); the
# portal's own code is not installed but put on PYTHONPATH below, so BASE_DIR (templates, static) is /app.
RUN /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock \
    && /opt/venv/bin/pip check

# -------------------------------------------------------------------------------------------- runtime
FROM python:3.11-slim-bookworm AS runtime
# WeasyPrint's Pango, HarfBuzz and a font (the weekly PDF report), as scripts/ci/install-report-deps.sh
# installs them (poppler-utils only reads PDFs back in tests: not here); Slurm 22.05's client tools
# (`scontrol` drains) and munge (its authentication), as scripts/slurm/install.sh installs them.
# tests/deploy/test_dockerfile.py keeps this list equal to the CI scripts'.
# libldap-2.5-0: the OpenLDAP library python-ldap was built against (libldap-dev's, in the build stage).
# No munge key in the image: the worker talks to the host's munged through its socket (docs/deployment.md).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core slurm-wlm munge libldap-2.5-0 \
    && rm -rf /var/lib/apt/lists/* /etc/munge/munge.key
RUN groupadd --system --gid 10001 gpuportal \
    && useradd --system --uid 10001 --gid gpuportal --home-dir /app --shell /usr/sbin/nologin gpuportal
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=root:root gpuportal gpuportal
COPY --chown=root:root scheduling scheduling
COPY --chown=root:root templates templates
COPY --chown=root:root static static
COPY --chown=root:root manage.py gunicorn.conf.py ./
COPY --chown=root:root deploy/docker/healthcheck.py /usr/local/bin/gpuportal-healthcheck
# The code is root-owned and read-only to the portal; only var/ (SQLite-free here, but settings create
# var/staticfiles and the beat schedule lives there) is the portal's to write, and /tmp (fontconfig's cache,
# for WeasyPrint, goes to XDG_CACHE_HOME).
RUN mkdir -p /app/var && chown gpuportal:gpuportal /app/var && chmod 0755 /usr/local/bin/gpuportal-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUPORTAL_VAR_DIR=/app/var \
    XDG_CACHE_HOME=/tmp/cache
USER 10001:10001
EXPOSE 8000
# The web command's probe; compose and Kubernetes give the worker and beat their own
# (`gpuportal-healthcheck worker|beat`).
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 CMD ["gpuportal-healthcheck", "web"]
# Migrations are a separate one-shot step (compose's `migrate` service, the Kubernetes migrate Job): many
# web replicas must never race to migrate.
CMD ["gunicorn", "-c", "gunicorn.conf.py", "gpuportal.wsgi", "-b", "0.0.0.0:8000", "-w", "3"]
