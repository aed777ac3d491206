"""Run docs/quickstart.md's project against the INSTALLED package (issue 30), as a new
user does: ``django-admin startproject``, the page's settings and ``myapp/jobs.py``,
``migrate``, an enqueue from ``manage.py shell``, a worker that runs it (the welcome
mail printed by the console backend). Run by scripts/package with the interpreter of a
venv where the wheel is installed; DATABASE_URL names the server (a database
``<name>_quickstart`` is made on it, and dropped after).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT = 300


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    shown = " ".join(argv[1:] if argv[0] == sys.executable else argv)
    print("  $", shown.splitlines()[0], flush=True)
    done = subprocess.run(  # noqa: S603 - our own command lines
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def main() -> None:
    import ultimate_jobs

    installed = Path(ultimate_jobs.__file__).resolve()
    # The release venv may live in the checkout (.venv-release/): what must not be
    # imported is the source package itself, REPO/ultimate_jobs.
    if (REPO / "ultimate_jobs") in installed.parents:
        sys.exit(f"ultimate_jobs comes from the source tree ({installed}), not a wheel")
    print(f"==> ultimate_jobs from {installed.parent}")
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        for extra in ("mcp", "django_prometheus", "opentelemetry.trace", "pgserver"):
            __import__(extra)  # the extras installed with the wheel import
    url = urlsplit(os.environ["DATABASE_URL"])
    name = f"{url.path.lstrip('/') or 'postgres'}_quickstart"
    server: dict[str, Any] = {
        "host": url.hostname or "127.0.0.1",
        "port": url.port or 5432,
        "user": url.username or "postgres",
        "password": url.password or "",
    }
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    settings_block, jobs_block, enqueue_block, cron_block = BLOCK.findall(
        (REPO / "docs" / "quickstart.md").read_text()
    )
    try:
        with tempfile.TemporaryDirectory(prefix="uj-quickstart-") as where:
            project = Path(where)
            env = {
                k: v
                for k, v in os.environ.items()
                if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")
                and not k.startswith("ULTIMATE_JOBS_")
            }
            python = [sys.executable]
            admin_cli = str(Path(sys.executable).with_name("django-admin"))
            run([admin_cli, "startproject", "mysite", "."], project, env)
            run([*python, "manage.py", "startapp", "myapp"], project, env)
            settings = project / "mysite" / "settings.py"
            # The page's block, added to the generated settings: its INSTALLED_APPS
            # stands for "Django's apps and yours", so it extends theirs.
            added = settings_block.replace("INSTALLED_APPS = [", "INSTALLED_APPS += [")
            database = {**server, "NAME": name}
            settings.write_text(
                settings.read_text()
                + "\n"
                + added
                + '\nINSTALLED_APPS += ["myapp"]\n'
                + f"DATABASES['default'].update({ {k.upper(): v for k, v in database.items()}!r})\n"
            )
            (project / "myapp" / "jobs.py").write_text(jobs_block + "\n" + cron_block)
            run(
                [*python, "manage.py", "migrate", "--no-input", "-v", "0"], project, env
            )
            checked = run(
                [*python, "manage.py", "check", "--database", "default"], project, env
            )
            if "W004" in checked:
                sys.exit(f"manage.py check still warns after migrate:\n{checked}")
            shell = run(
                [*python, "manage.py", "shell", "-c", enqueue_block], project, env
            )
            worker = run(
                [
                    *python,
                    "manage.py",
                    "jobs_worker",
                    "--roles",
                    "worker",
                    "--max-jobs",
                    "1",
                ],
                project,
                env,
            )
            for text in ("Subject: Welcome!", "To: ada@example.com", "Hello ada."):
                if text not in worker:
                    sys.exit(f"{text!r} not in the worker's output:\n{worker}")
            print(
                f"==> the quick start ran against the wheel: {shell.strip() or 'enqueued'}"
            )
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
