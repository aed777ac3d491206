-- Statements of the scheduler (C3-C8): the leader lease, task watermarks, the fire,
-- runtime schedules, pauses.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).
-- The channel 'ultimate_jobs_scheduler' carries 'lease' (a leader let go),
-- 'schedules' (a runtime schedule changed) and 'resume' (a task was resumed).

-- name: leader_acquire :one
-- Take the lease of a role, or renew it (C3). It goes to `holder` when `holder`
-- already holds it or when it expired; otherwise it is left alone: a lease row with
-- an expiry, never an advisory lock (a pooled connection would drop the lock).
-- `term` grows each time the lease changes hands. The answer says who holds it, and
-- for how many more seconds, so a standby asks again the moment it runs out. A
-- holder also gets the revision of the runtime schedules (a digest of their keys and
-- update times), so a leader notices an edit whose notification was lost, with no
-- statement of its own.
WITH taken AS (
    INSERT INTO ultimate_jobs_leader_lease AS lease (
        role, holder, term, acquired_at, renewed_at, expires_at
    )
    VALUES (
        %(role)s::text,
        %(holder)s::text,
        1,
        coalesce(%(now)s::timestamptz, now()),
        coalesce(%(now)s::timestamptz, now()),
        coalesce(%(now)s::timestamptz, now())
            + make_interval(secs => %(ttl)s::double precision)
    )
        ON CONFLICT (role) DO UPDATE
       SET holder = excluded.holder,
           term = CASE WHEN lease.holder = excluded.holder
                       THEN lease.term ELSE lease.term + 1 END,
           acquired_at = CASE WHEN lease.holder = excluded.holder
                              THEN lease.acquired_at ELSE excluded.acquired_at END,
           renewed_at = excluded.renewed_at,
           expires_at = excluded.expires_at
     WHERE lease.holder = excluded.holder
        OR lease.expires_at <= excluded.renewed_at
    RETURNING lease.holder, lease.term, lease.expires_at
)
SELECT coalesce(taken.holder, current.holder) AS holder,
       coalesce(taken.term, current.term) AS term,
       taken.holder IS NOT NULL AS acquired,
       extract(
           epoch FROM coalesce(taken.expires_at, current.expires_at)
                      - coalesce(%(now)s::timestamptz, now())
       )::double precision AS expires_in,
       CASE WHEN taken.holder IS NOT NULL THEN (
           SELECT md5(coalesce(
                      string_agg(s.key || '@' || s.updated_at::text, ',' ORDER BY s.key),
                      ''
                  ))
             FROM ultimate_jobs_schedule AS s
       ) END AS schedules_revision
  FROM (SELECT 1) AS one
  LEFT JOIN taken ON true
  LEFT JOIN ultimate_jobs_leader_lease AS current ON current.role = %(role)s::text;

-- name: leader_release :many
-- Hand the lease back on a clean stop: it expires now and the standbys are told on
-- the scheduler channel (delivered on commit), so one takes over at once instead of
-- at the expiry. Only a live holder releases; a demoted leader releases nothing.
UPDATE ultimate_jobs_leader_lease AS lease
   SET expires_at = coalesce(%(now)s::timestamptz, now())
 WHERE lease.role = %(role)s::text
   AND lease.holder = %(holder)s::text
   AND lease.expires_at > coalesce(%(now)s::timestamptz, now())
RETURNING lease.role, pg_notify('ultimate_jobs_scheduler', 'lease') IS NULL AS announced;

-- name: scheduler_sync :many
-- Give every task and schedule the leader knows a watermark row, and answer them all:
-- one statement for any number of tasks, run when a scheduler starts to lead (C8:
-- then the watermarks are held in memory). A new row starts at `start`: nothing
-- before a scheduler first saw the task counts as missed. A row whose spec (cron and
-- time zone) changed restarts at `start` as well (never earlier than it was): the
-- occurrences of a cron that was not in force are not caught up. Pauses are kept.
WITH wanted AS (
    SELECT w.key, w.kind, w.name, w.spec
      FROM unnest(
               %(keys)s::text[],
               %(kinds)s::text[],
               %(names)s::text[],
               %(specs)s::text[]
           ) AS w(key, kind, name, spec)
),
written AS (
    INSERT INTO ultimate_jobs_task_watermark AS mark (
        key, kind, name, spec, last_occurrence, fires, paused, paused_by, created_at
    )
    SELECT wanted.key, wanted.kind, wanted.name, wanted.spec, %(start)s::timestamptz,
           0, false, '', coalesce(%(now)s::timestamptz, now())
      FROM wanted
        ON CONFLICT (key) DO UPDATE
       SET spec = excluded.spec,
           last_occurrence = greatest(mark.last_occurrence, excluded.last_occurrence)
     WHERE mark.spec IS DISTINCT FROM excluded.spec
    RETURNING mark.key, mark.last_occurrence, mark.paused
)
SELECT wanted.key,
       coalesce(written.last_occurrence, mark.last_occurrence) AS last_occurrence,
       coalesce(written.paused, mark.paused) AS paused,
       written.key IS NOT NULL AS restarted
  FROM wanted
  LEFT JOIN written ON written.key = wanted.key
  LEFT JOIN ultimate_jobs_task_watermark AS mark ON mark.key = wanted.key;

-- name: scheduler_fire :one
-- Fire one occurrence of one task or schedule (C4). ONE statement moves the watermark
-- from `expected` to `watermark` and inserts the occurrence's jobs, so no crash can
-- land between the two and an occurrence never fires twice. The move is a
-- compare-and-set fenced on the lease: nothing is written unless the watermark still
-- reads `expected`, the task is not paused, and `holder` holds the scheduler lease
-- (a demoted leader writes nothing, C3). Each job's idempotency key carries the
-- occurrence; a key a live job already holds inserts nothing (J2). Each queue that
-- got a row due within a second is announced once (N1). `status` answers what
-- happened: fired, paused, not-leader, missing (no watermark row) or moved (the
-- watermark is no longer `expected`; `current` is what it reads).
WITH lease AS (
    SELECT lease.holder
      FROM ultimate_jobs_leader_lease AS lease
     WHERE lease.role = %(role)s::text
       AND lease.holder = %(holder)s::text
       AND lease.expires_at > coalesce(%(now)s::timestamptz, now())
),
moved AS (
    UPDATE ultimate_jobs_task_watermark AS mark
       SET last_occurrence = %(watermark)s::timestamptz,
           last_fired_occurrence = %(occurrence)s::timestamptz,
           last_fired_at = coalesce(%(now)s::timestamptz, now()),
           fires = mark.fires + 1
     WHERE mark.key = %(key)s::text
       AND mark.last_occurrence = %(expected)s::timestamptz
       AND NOT mark.paused
       AND EXISTS (SELECT 1 FROM lease)
    RETURNING mark.key
),
input AS (
    -- The occurrence's jobs, only when the watermark moved.
    SELECT fired.*
      FROM ({{job_input}}) AS fired
     WHERE EXISTS (SELECT 1 FROM moved)
),
inserted AS (
    {{job_insert}}
),
woken AS (
    SELECT pg_notify('ultimate_jobs_wake', due.queue)
      FROM (
            SELECT DISTINCT inserted.queue
              FROM inserted
             WHERE inserted.run_at
                   <= coalesce(%(now)s::timestamptz, now()) + interval '1 second'
           ) AS due
)
SELECT CASE
           WHEN EXISTS (SELECT 1 FROM moved) THEN 'fired'
           WHEN NOT EXISTS (SELECT 1 FROM lease) THEN 'not-leader'
           WHEN mark.key IS NULL THEN 'missing'
           WHEN mark.paused THEN 'paused'
           ELSE 'moved'
       END AS status,
       mark.last_occurrence AS current,
       (SELECT coalesce(array_agg(inserted.id), '{}') FROM inserted) AS inserted_ids,
       (SELECT count(*) FROM woken) AS announced
  FROM (SELECT 1) AS one
  LEFT JOIN ultimate_jobs_task_watermark AS mark ON mark.key = %(key)s::text;

-- name: schedule_list :many
-- Every runtime schedule (C6), for the leader to hold in memory: read when it starts
-- to lead and when the schedules changed, never per tick (C8).
SELECT s.key, s.job, s.input, s.cron, s.tz, s.catch_up, s.max_catch_up
  FROM ultimate_jobs_schedule AS s
 ORDER BY s.key;

-- name: task_pause :many
-- Pause a task or schedule (C7): the fire statement refuses it from its very next
-- occurrence on, and its watermark stays where it is, so a resume catches up per the
-- policy. A task no scheduler has seen yet gets its watermark row here (its spec is
-- filled, and its start set, by the first scheduler that syncs it). Answers the key
-- when it was not paused before.
INSERT INTO ultimate_jobs_task_watermark AS mark (
    key, kind, name, spec, last_occurrence, fires, paused, paused_at, paused_by,
    created_at
)
VALUES (
    %(key)s::text,
    %(kind)s::text,
    %(name)s::text,
    '',
    coalesce(%(now)s::timestamptz, now()),
    0,
    true,
    coalesce(%(now)s::timestamptz, now()),
    %(paused_by)s::text,
    coalesce(%(now)s::timestamptz, now())
)
    ON CONFLICT (key) DO UPDATE
   SET paused = true,
       paused_at = excluded.paused_at,
       paused_by = excluded.paused_by
 WHERE NOT mark.paused
RETURNING mark.key;

-- name: task_resume :many
-- Resume a paused task or schedule and tell the leader (delivered on commit), which
-- then fires what the pause held back, per the catch-up policy, at its next tick.
-- Answers the key when it was paused.
UPDATE ultimate_jobs_task_watermark AS mark
   SET paused = false,
       paused_at = NULL,
       paused_by = ''
 WHERE mark.key = %(key)s::text
   AND mark.paused
RETURNING mark.key, pg_notify('ultimate_jobs_scheduler', 'resume') IS NULL AS announced;

-- name: scheduler_notify :exec
-- Tell the scheduler leader something changed (`payload` 'schedules': a runtime
-- schedule was saved or deleted). Delivered on commit; the leader's lease renewal
-- notices the change anyway if the notification is lost.
SELECT pg_notify('ultimate_jobs_scheduler', %(payload)s::text);
