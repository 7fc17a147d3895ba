from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _install_change_triggers(sender, using="default", **kwargs) -> None:
    from scheduling.services import table_changes  # not at import: apps.py loads before the models exist

    table_changes.install_triggers(using)


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "GPU scheduling"

    def ready(self) -> None:
        # After every migrate, so tables added by any app's later migrations are counted too.
        post_migrate.connect(_install_change_triggers, sender=self, dispatch_uid="gpuportal-change-triggers")
