"""The chaos run's judgement of a job that ran twice (benchmarks/chaos/verify.py): a
re-run counts as explained only by a lapsed lease, so the check can fail."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from benchmarks.chaos.fleet import Fault
from benchmarks.chaos.verify import AVOIDABLE, explain, keyed_overlaps

LEASE = 5.0


def finish(att: int, pid: int, t: float, job: str = "j1") -> dict[str, object]:
    return {"k": "finish", "job": job, "att": att, "pid": pid, "t": t, "name": "x"}


def fleet(**signalled: tuple[str, float]) -> Any:
    generations = {
        int(pid): SimpleNamespace(signal=how, signalled_at=at)
        for pid, (how, at) in signalled.items()
    }
    return SimpleNamespace(by_pid=lambda: generations)


def restart(at: float, ended: float) -> Fault:
    return Fault(index=3, kind="fast restart", target="postgresql", at=at, ended=ended)


def test_a_rerun_with_no_fault_and_no_lapse_logged_is_unexplained():
    why = explain(finish(1, 11, 100.0), finish(2, 12, 110.0), fleet(), [], {}, LEASE)
    assert why is None


def test_the_same_claim_finishing_twice_is_never_explained():
    killed = fleet(**{"11": ("SIGKILL", 101.0)})
    why = explain(finish(2, 11, 100.0), finish(2, 12, 110.0), killed, [], {}, LEASE)
    assert why is None


def test_a_sigkill_after_the_body_finished_explains_it():
    killed = fleet(**{"11": ("SIGKILL", 100.5)})
    why = explain(finish(1, 11, 100.0), finish(2, 12, 110.0), killed, [], {}, LEASE)
    assert why == "SIGKILL before its settle landed"


def test_a_sigkill_before_the_body_finished_does_not():
    killed = fleet(**{"11": ("SIGKILL", 99.0)})
    assert (
        explain(finish(1, 11, 100.0), finish(2, 12, 110.0), killed, [], {}, LEASE)
        is None
    )


def test_a_lost_lease_logged_by_its_worker_explains_it():
    evidence = {11: {"j1"}}
    why = explain(
        finish(1, 11, 100.0), finish(2, 12, 110.0), fleet(), [], evidence, LEASE
    )
    assert why == AVOIDABLE


def test_a_lost_lease_in_a_database_fault_is_not_the_avoidable_kind():
    """Issue 31: a lease lost while the server was down is at-least-once (no
    connection renews then); only one lost while it was up counts as avoidable."""
    evidence = {11: {"j1"}}
    near = restart(at=102.0, ended=103.0)
    why = explain(
        finish(1, 11, 100.0), finish(2, 12, 110.0), fleet(), [near], evidence, LEASE
    )
    assert why == "lease lost in the fast restart (#3)"


def test_a_database_fault_explains_it_only_around_the_fault():
    near, far = restart(at=102.0, ended=103.0), restart(at=300.0, ended=301.0)
    why = explain(finish(1, 11, 100.0), finish(2, 12, 110.0), fleet(), [near], {}, 5)
    assert why == "settle cut by the fast restart (#3)"
    assert (
        explain(finish(1, 11, 100.0), finish(2, 12, 110.0), fleet(), [far], {}, 5)
        is None
    )


def test_keyed_overlaps_counts_runs_of_one_account_at_once():
    def runs(
        job: str, account: str, start: float, end: float
    ) -> list[dict[str, object]]:
        common = {"job": job, "att": 1, "name": "chaosapp.keyed", "account": account}
        return [
            {**common, "k": "start", "t": start},
            {**common, "k": "finish", "t": end},
        ]

    records = [
        *runs("a", "acct-1", 0.0, 1.0),
        *runs("b", "acct-1", 1.0, 2.0),  # back to back: not at once
        *runs("c", "acct-2", 0.0, 1.0),
    ]
    assert keyed_overlaps(records) == 0
    assert keyed_overlaps([*records, *runs("d", "acct-1", 1.5, 2.5)]) == 1
