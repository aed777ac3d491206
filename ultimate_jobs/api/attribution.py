"""Who enqueued a job, as a person reads it (H2): ``enqueued_by_name``.

``handle.using(actor=user)`` records the actor's primary key as ``enqueued_by``
(attribution, never authority). The operator views show the display name beside it:
the user (``AUTH_USER_MODEL``) whose primary key that is, named by
``get_full_name()`` or else the username. The name is read when it is shown, in ONE
query per page, so a renamed user shows the new name; an ``enqueued_by`` that names no
user (a string actor, the scheduler, a deleted user) has no display name (None).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.core.exceptions import ValidationError


def _display_name(user: object) -> str:
    full = getattr(user, "get_full_name", None)
    name = full() if callable(full) else ""
    if isinstance(name, str) and name.strip():
        return name.strip()
    username = getattr(user, "get_username", None)
    return str(username()) if callable(username) else str(user)


def display_names(keys: Iterable[str]) -> dict[str, str]:
    """The display name of each ``enqueued_by`` value that is a user's primary key."""
    wanted = {key for key in keys if key}
    if not wanted or not apps.is_installed("django.contrib.auth"):
        return {}
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    pk_field = user_model._meta.pk
    assert pk_field is not None  # noqa: S101 - every concrete model has one
    by_pk: dict[object, str] = {}
    for key in wanted:
        try:
            by_pk[pk_field.to_python(key)] = key
        except (ValidationError, ValueError, TypeError):
            continue  # not a user's key: a string actor, "scheduler <holder>", ...
    if not by_pk:
        return {}
    users = user_model._default_manager.filter(pk__in=list(by_pk))
    return {by_pk[user.pk]: _display_name(user) for user in users if user.pk in by_pk}
