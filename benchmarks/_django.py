"""Django for a benchmark: the test settings on a throwaway SQLite file, or on $BENCH_DATABASE_URL (an empty
database you own), migrated."""

import os
import tempfile


def throwaway_django(name: str) -> str:
    """Set Django up for benchmark ``name``; the database vendor."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "gpuportal.settings_test"
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='gpuportal-bench-')}/{name}.sqlite3"
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return django.db.connection.vendor
