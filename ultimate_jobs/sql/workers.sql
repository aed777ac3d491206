-- Statements on ultimate_jobs_worker: the live-worker registry (W8).

-- name: worker_beat :many
-- Upsert this worker's row (host, pid, queues, slots, at most 100 in-flight job ids,
-- and the slots lost to bodies running past their timeout with their job ids) and
-- push its expiry one lease ahead; rows whose expiry passed are deleted on the way,
-- so the registry lists live workers only. The job names its code declares (`names`,
-- NULL when not recorded) are written when the row is inserted, never at a later
-- beat: they cannot change in one process (issue 30). Answers `drain`: whether an
-- operator asked this worker to drain (the admin's Drain button), which it honours at once.
WITH expired AS (
    DELETE FROM ultimate_jobs_worker AS worker
     WHERE worker.expires_at < coalesce(%(now)s::timestamptz, now())
       AND worker.id <> %(id)s::text
)
INSERT INTO ultimate_jobs_worker (
    id, host, pid, started_at, queues, names, slots, in_flight, abandoned,
    abandoned_jobs, heartbeat_at, expires_at
)
VALUES (
    %(id)s::text,
    %(host)s::text,
    %(pid)s::integer,
    %(started_at)s::timestamptz,
    to_jsonb(%(queues)s::text[]),
    to_jsonb(%(names)s::text[]),
    %(slots)s::integer,
    to_jsonb((%(in_flight)s::uuid[])[1:100]),
    %(abandoned)s::integer,
    to_jsonb((%(abandoned_jobs)s::uuid[])[1:100]),
    coalesce(%(now)s::timestamptz, now()),
    coalesce(%(now)s::timestamptz, now())
        + make_interval(secs => %(lease_seconds)s::double precision)
)
    ON CONFLICT (id) DO UPDATE
   SET queues = excluded.queues,
       slots = excluded.slots,
       in_flight = excluded.in_flight,
       abandoned = excluded.abandoned,
       abandoned_jobs = excluded.abandoned_jobs,
       heartbeat_at = excluded.heartbeat_at,
       expires_at = excluded.expires_at
RETURNING ultimate_jobs_worker.drain_requested_at IS NOT NULL AS drain;

-- name: worker_drain_request :many
-- Ask one live worker to drain (issue 15): its next heartbeat answers drain = true and
-- it stops claiming, finishes its runs and exits. Answers the worker when it is live.
UPDATE ultimate_jobs_worker AS worker
   SET drain_requested_at = coalesce(worker.drain_requested_at, now()),
       drain_requested_by = %(requested_by)s::text
 WHERE worker.id = %(id)s::text
   AND worker.expires_at > now()
RETURNING worker.id;

-- name: worker_remove :exec
-- Delete this worker's row on a clean exit.
DELETE FROM ultimate_jobs_worker AS worker
 WHERE worker.id = %(id)s::text;
