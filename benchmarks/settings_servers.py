"""Django settings of the several-servers simulation (benchmarks/servers.py, Q1, Q3).

``SIM_SERVERS`` lists one database URL per PostgreSQL server; the first is ``default``,
the others ``server1`` … ``serverN-1``. ``SIM_LAYOUT=spread`` routes queue ``simI`` to
server I (QUEUES' mapping form); ``SIM_LAYOUT=one`` leaves every queue on ``default``.
"""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "benchmarks-only"  # noqa: S105 - never served
DEBUG = False
ALLOWED_HOSTS: list[str] = []
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "ultimate_jobs",
    "benchmarks.serversapp",
]
_URLS = env.list("SIM_SERVERS")
ALIASES = ["default", *(f"server{i}" for i in range(1, len(_URLS)))]
DATABASES = {
    alias: env.db_url_config(url) for alias, url in zip(ALIASES, _URLS, strict=True)
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
_SPREAD = env.str("SIM_LAYOUT", default="spread") == "spread"
ULTIMATE_JOBS: dict[str, object] = {
    "QUEUES": {
        f"sim{i}": {"database": alias if _SPREAD else "default"}
        for i, alias in enumerate(ALIASES)
    },
    "LEASE": env.float("SIM_LEASE", default=10.0),
}
