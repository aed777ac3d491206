-- Statements of the durable run (S1-S9) on ultimate_jobs_step, and the writes the step
-- API makes on the job row it belongs to (suspend, reschedule, progress).
--
-- Every write is fenced on the claim like a settle (W3): it matches the job only while
-- it is 'running' under the caller's lease_owner, and the job row is locked FOR KEY
-- SHARE until the write commits, so no other worker's claim (FOR UPDATE SKIP LOCKED)
-- can take the job over in between, while the heartbeat and progress updates of the
-- same worker still go through. No row answered means the claim is no longer the
-- caller's and nothing was written.
-- Step stamps use statement_timestamp(): inside an atomic_step's transaction now()
-- would be the transaction's start. %(now)s replaces the clock in tests.

-- fragment: claim_held
-- The job's row while the caller's claim holds it (W3), locked FOR KEY SHARE until the
-- write commits; no row: the claim is lost. The step writes here and run.spawn's and
-- run.wait_for_jobs' (workflows.sql) are fenced on it.
SELECT job.id
  FROM ultimate_jobs_job AS job
 WHERE job.id = %(job_id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
   FOR KEY SHARE

-- name: step_list :many
-- The current (not archived) steps of one job, read once per attempt for the replay:
-- a completed step answers its stored output without running again (S1).
SELECT step.name,
       step.kind,
       step.status,
       step.output::text AS output,
       step.wake_at
  FROM ultimate_jobs_step AS step
 WHERE step.job_id = %(job_id)s::uuid
   AND NOT step.archived
 ORDER BY step.id;

-- name: step_record :many
-- Record a completed step (run.step, run.atomic_step) with its JSON output (S1, S9).
-- Inside atomic_step this runs in the body's transaction: the FOR KEY SHARE lock holds
-- the claim until the body's writes and this checkpoint commit together. A step already
-- recorded under the name keeps its first output, which is answered.
WITH owner AS (
    {{claim_held}}
)
INSERT INTO ultimate_jobs_step (
    job_id, name, kind, status, output, attempt, started_at, finished_at
)
SELECT owner.id,
       %(name)s::text,
       %(kind)s::text,
       'done',
       %(output)s::jsonb,
       %(attempt)s::integer,
       coalesce(%(now)s::timestamptz, statement_timestamp())
           - make_interval(secs => %(duration)s::double precision),
       coalesce(%(now)s::timestamptz, statement_timestamp())
  FROM owner
    ON CONFLICT (job_id, name) WHERE NOT archived
    DO UPDATE SET output = ultimate_jobs_step.output
RETURNING ultimate_jobs_step.output::text AS output;

-- name: step_sleep :many
-- Start a sleep (S3): record its wake time, the clock plus `seconds`, so a replay
-- sleeps until the same moment. A sleep already recorded keeps its wake time.
WITH owner AS (
    {{claim_held}}
)
INSERT INTO ultimate_jobs_step (
    job_id, name, kind, status, attempt, started_at, wake_at
)
SELECT owner.id,
       %(name)s::text,
       'sleep',
       'waiting',
       %(attempt)s::integer,
       coalesce(%(now)s::timestamptz, statement_timestamp()),
       coalesce(%(now)s::timestamptz, statement_timestamp())
           + make_interval(secs => %(seconds)s::double precision)
  FROM owner
    ON CONFLICT (job_id, name) WHERE NOT archived
    DO UPDATE SET wake_at = ultimate_jobs_step.wake_at
RETURNING ultimate_jobs_step.wake_at;

-- name: step_wake :many
-- End a sleep whose wake time has passed on the clock (S3). No row: the sleep is not
-- due yet (the run suspends again until its wake time) or the claim is lost (and the
-- suspension that follows is fenced out too).
WITH owner AS (
    {{claim_held}}
)
UPDATE ultimate_jobs_step AS step
   SET status = 'done',
       finished_at = coalesce(%(now)s::timestamptz, statement_timestamp())
  FROM owner
 WHERE step.job_id = owner.id
   AND step.name = %(name)s::text
   AND NOT step.archived
   AND step.status = 'waiting'
   AND step.wake_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
RETURNING step.id;

-- name: step_wait :many
-- Start a wait_for_event (S4): the event name, the match and the deadline (the clock
-- plus `timeout`; NULL for none) are recorded once, so a replay keeps the deadline.
WITH owner AS (
    {{claim_held}}
)
INSERT INTO ultimate_jobs_step (
    job_id, name, kind, status, attempt, started_at, wake_at, event, match
)
SELECT owner.id,
       %(name)s::text,
       'event',
       'waiting',
       %(attempt)s::integer,
       coalesce(%(now)s::timestamptz, statement_timestamp()),
       coalesce(%(now)s::timestamptz, statement_timestamp())
           + make_interval(secs => %(timeout)s::double precision),
       %(event)s::text,
       %(match)s::jsonb
  FROM owner
    ON CONFLICT (job_id, name) WHERE NOT archived
    DO UPDATE SET match = ultimate_jobs_step.match
RETURNING ultimate_jobs_step.id;

-- name: step_take_event :many
-- Answer a waiting wait_for_event (S4) from the event table: the earliest unexpired
-- event of its name and the job's tenant whose payload contains the match, published
-- at or after the job was enqueued, that no step of this job consumed. Found: the step
-- is done with that payload (and consumes the event). None, and the deadline passed on
-- the clock: the step timed out. Otherwise it stays waiting. Both times are the
-- database's, so a worker whose own clock runs ahead neither misses an answer nor gives
-- up early. One row answered while the claim is the caller's.
WITH owner AS (
    SELECT job.id, job.tenant_id, job.created_at
      FROM ultimate_jobs_job AS job
     WHERE job.id = %(job_id)s::uuid
       AND job.state = 'running'
       AND job.lease_owner = %(lease_owner)s::uuid
       FOR KEY SHARE
),
wait AS (
    SELECT step.id, step.job_id, step.event, step.match, step.wake_at,
           owner.tenant_id, owner.created_at
      FROM ultimate_jobs_step AS step
      JOIN owner ON owner.id = step.job_id
     WHERE step.name = %(name)s::text
       AND NOT step.archived
       AND step.status = 'waiting'
       FOR UPDATE OF step
),
found AS (
    SELECT event.id, event.payload
      FROM wait
      JOIN ultimate_jobs_event AS event ON event.name = wait.event
     WHERE event.payload @> wait.match
       AND event.tenant_id IS NOT DISTINCT FROM wait.tenant_id
       AND event.published_at >= wait.created_at
       AND event.expires_at > coalesce(%(now)s::timestamptz, statement_timestamp())
       AND NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_step AS consumed
                WHERE consumed.job_id = wait.job_id
                  AND consumed.event_id = event.id
           )
     ORDER BY event.published_at, event.id
     LIMIT 1
),
ended AS (
    UPDATE ultimate_jobs_step AS step
       SET status = CASE WHEN found.id IS NULL THEN 'timed_out' ELSE 'done' END,
           output = found.payload,
           event_id = found.id,
           woken = false,
           finished_at = coalesce(%(now)s::timestamptz, statement_timestamp())
      FROM wait
      LEFT JOIN found ON true
     WHERE step.id = wait.id
       AND (found.id IS NOT NULL
            OR wait.wake_at <= coalesce(%(now)s::timestamptz, statement_timestamp()))
    RETURNING step.status, step.output::text AS output
)
SELECT coalesce(ended.status, 'waiting') AS status,
       ended.output,
       wait.wake_at
  FROM wait
  LEFT JOIN ended ON true;

-- name: job_suspend :many
-- Park a running job (S3, S4, W9): 'suspended' until `wake_at` (a sleep's wake time, a
-- wait's deadline) or, for a wait, `poll` seconds on the clock, whichever is first. No
-- attempt is spent: the claim's increment is taken back. For a wait (`step` names it)
-- the step row is locked first: a publication that matched it meanwhile (woken) makes
-- the job due at once, so a publication racing the suspension does not wait for the
-- poll. The claim statement takes the row again when run_at passes. `due_in` is the
-- wait in seconds on the database's clock (the worker's local timer uses it).
WITH wait AS (
    SELECT step.id, step.woken
      FROM ultimate_jobs_step AS step
     WHERE step.job_id = %(id)s::uuid
       AND step.name = %(step)s::text
       AND NOT step.archived
       AND step.status = 'waiting'
       FOR UPDATE
),
rearmed AS (
    UPDATE ultimate_jobs_step AS step
       SET woken = false
      FROM wait
     WHERE step.id = wait.id
       AND wait.woken
),
parked AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'suspended',
           run_at = CASE
               WHEN coalesce((SELECT bool_or(wait.woken) FROM wait), false)
               THEN coalesce(%(now)s::timestamptz, now())
               ELSE coalesce(
                   least(
                       %(wake_at)s::timestamptz,
                       coalesce(%(now)s::timestamptz, now())
                           + make_interval(secs => %(poll)s::double precision)
                   ),
                   coalesce(%(now)s::timestamptz, now())
               )
           END,
           lease_owner = NULL,
           lease_expires_at = NULL,
           attempt = job.attempt - 1,
           progress = coalesce(%(progress)s::jsonb, job.progress)
     WHERE job.id = %(id)s::uuid
       AND job.state = 'running'
       AND job.lease_owner = %(lease_owner)s::uuid
    RETURNING job.id, job.run_at
)
SELECT parked.id,
       parked.run_at,
       extract(epoch FROM parked.run_at - coalesce(%(now)s::timestamptz, now()))::double precision
           AS due_in
  FROM parked;

-- name: job_reschedule :many
-- End a stage of a staged job (S5): the same row back to the queue with a new input,
-- attempt reset to 0 (a fresh retry budget), due after `delay` seconds or at `run_at`;
-- id, run id and idempotency key are kept. The stage's steps are archived: the next
-- stage replays none of them, and the events they consumed stay consumed. A stage due
-- within a second wakes the queue's workers (N1). The attempt that ended the stage is
-- kept in the attempt history (P6).
WITH due AS (
    SELECT coalesce(
               %(run_at)s::timestamptz,
               coalesce(%(now)s::timestamptz, now())
                   + make_interval(secs => coalesce(%(delay)s::double precision, 0))
           ) AS at
),
moved AS (
    UPDATE ultimate_jobs_job AS job
       SET state = CASE
               WHEN due.at > coalesce(%(now)s::timestamptz, now()) THEN 'delayed'
               ELSE 'ready'
           END,
           run_at = due.at,
           input = %(input)s::jsonb,
           attempt = 0,
           lease_owner = NULL,
           lease_expires_at = NULL,
           last_error = '',
           error_code = '',
           progress = coalesce(%(progress)s::jsonb, job.progress)
      FROM due
     WHERE job.id = %(id)s::uuid
       AND job.state = 'running'
       AND job.lease_owner = %(lease_owner)s::uuid
    RETURNING job.id, job.queue, job.run_at
),
archived AS (
    UPDATE ultimate_jobs_step AS step
       SET archived = true
      FROM moved
     WHERE step.job_id = moved.id
       AND NOT step.archived
),
kept AS (
    -- P6: the next stage starts at attempt 0, so the attempt that ended this stage is
    -- kept in the attempt history. Every part of one statement reads the same
    -- snapshot, so `before` is the row as it was.
    INSERT INTO ultimate_jobs_attempt
           (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome)
    SELECT before.id, before.run_id, before.attempt, before.worker_id,
           before.started_at, coalesce(%(now)s::timestamptz, now()), 'rescheduled'
      FROM moved
      JOIN ultimate_jobs_job AS before ON before.id = moved.id
)
SELECT moved.id,
       moved.run_at,
       extract(epoch FROM moved.run_at - coalesce(%(now)s::timestamptz, now()))::double precision
           AS due_in,
       CASE
           WHEN moved.run_at <= coalesce(%(now)s::timestamptz, now()) + interval '1 second'
           THEN pg_notify('ultimate_jobs_wake', moved.queue) IS NULL
           ELSE false
       END AS announced
  FROM moved;

-- name: job_progress :many
-- Record a running job's progress (S7). The run writes at most once a second and
-- hands its last value to the statement that settles the attempt.
UPDATE ultimate_jobs_job AS job
   SET progress = %(progress)s::jsonb
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id;

-- name: step_drop_from :many
-- Forget one current step of a finished job and every step recorded after it (P2:
-- retry from_step), so the requeued run runs them again; the events their waits
-- consumed become matchable again. Answers the dropped names; none when the job is not
-- finished or has no current step of that name.
WITH start AS (
    SELECT step.id
      FROM ultimate_jobs_step AS step
      JOIN ultimate_jobs_job AS job ON job.id = step.job_id
     WHERE step.job_id = %(job_id)s::uuid
       AND step.name = %(name)s::text
       AND NOT step.archived
       AND job.state IN ('done', 'failed', 'dead', 'cancelled')
)
DELETE FROM ultimate_jobs_step AS step
 USING start
 WHERE step.job_id = %(job_id)s::uuid
   AND NOT step.archived
   AND step.id >= start.id
RETURNING step.name;
