"""Test settings: production settings (DEBUG off) with a throwaway key and a fast password hasher."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-not-a-secret")
os.environ.setdefault("GPUPORTAL_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test"))

from .settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The test client speaks plain HTTP; everything else stays as in production (DEBUG off, secure cookies).
SECURE_SSL_REDIRECT = False
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# The live fixtures (slurmrestd, Ray, the echo servers of tests/security) listen on 127.0.0.1.
GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS = True
