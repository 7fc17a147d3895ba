import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_and_migrations_agree():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_the_engine_package_imports_without_django_settings():
    import subprocess
    import sys

    code = (
        "import sys, scheduling.engine.placement, scheduling.engine.fragmentation; assert 'django' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": ""}, check=False)
    assert result.returncode == 0, result.stderr
