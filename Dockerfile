FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gpuportal gpuportal
COPY scheduling scheduling
COPY templates templates
COPY static static
COPY manage.py gunicorn.conf.py ./
RUN pip install --no-cache-dir . gunicorn
ENV GPUPORTAL_VAR_DIR=/app/var
EXPOSE 8000
