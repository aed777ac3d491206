"""C1's "no such date" refusal asks croniter only when the day-of-month field names no
day before the 29th (scheduling/cron.py): around that boundary the verdict is
croniter's own, as it was when every declaration asked it."""

from __future__ import annotations

from datetime import datetime

import pytest
from croniter import CroniterBadDateError, croniter

from ultimate_jobs.ground.exceptions import InvalidCron
from ultimate_jobs.scheduling.cron import parse_cron


def croniter_finds_a_date(expression: str) -> bool:
    try:
        croniter(expression, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 28 2 *",
        "0 0 29 2 *",
        "0 0 30 2 *",
        "0 0 31 2 *",
        "0 0 28-31 2 *",
        "0 0 30,31 2 *",
        "0 0 30,31 2,4 *",
        "0 0 31 4,6,9,11 *",
        "0 0 31 apr-jun *",
        "0 0 31/2 2 *",
        "0 0 */29 2 *",
        "0 0 29/1 2 *",
        "0 0 31 2 mon",
        "0 0 30 feb 0-7",
        "0 0 1,31 2 *",
    ],
)
def test_the_no_such_date_verdict_is_croniters(expression):
    if croniter_finds_a_date(expression):
        assert parse_cron(expression) == expression
    else:
        with pytest.raises(InvalidCron, match="no such date"):
            parse_cron(expression)
