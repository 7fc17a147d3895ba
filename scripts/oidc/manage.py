#!/usr/bin/env python
"""The test OIDC provider's manage.py (scripts/oidc/start.sh runs migrate, seed and runserver)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provider.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
