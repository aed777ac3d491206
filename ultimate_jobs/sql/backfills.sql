-- Statements of the backfill ledger (F1, F2) on ultimate_jobs_backfill, in the order a
-- pass uses them: the command records a queued pass, the pass reads where its name
-- stands, starts (or adopts) its row, reports progress per batch and finishes; the
-- operator surfaces read one projection of the ledger.
--
-- The ledger is a report, never a resume source: where a resumed pass restarts is the
-- answer of its steps (ultimate_jobs_step). A run has one row (unique job_id), adopted
-- by every attempt, so started_at is when the pass began, not when this attempt did.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).

-- name: backfill_enqueued :exec
-- Record a pass `db_backfill --write` just put on the queue, as pending. A worker that
-- already started the run (its row is running) is not sent back: DO NOTHING.
INSERT INTO ultimate_jobs_backfill (
    name, checksum, status, app_version, job_id, forced, rows, batches, error
)
VALUES (
    %(name)s::text,
    %(checksum)s::text,
    'pending',
    %(app_version)s::text,
    %(job_id)s::uuid,
    %(forced)s::boolean,
    0,
    0,
    ''
)
    ON CONFLICT (job_id) DO NOTHING;

-- name: backfill_standing :many
-- The rows that decide a pass when an attempt starts: the run's own row, if an earlier
-- attempt (or the command) wrote one (`own` is TRUE), and the newest row of the name.
-- Answers none, one row (the same row can be both), or two.
SELECT pass.id,
       pass.status,
       pass.checksum,
       pass.completed_at,
       pass.job_id IS NOT DISTINCT FROM %(job_id)s::uuid AS own
  FROM ultimate_jobs_backfill AS pass
 WHERE pass.job_id = %(job_id)s::uuid
    OR pass.id = (
           SELECT max(newest.id)
             FROM ultimate_jobs_backfill AS newest
            WHERE newest.name = %(name)s::text
       )
 ORDER BY own DESC;

-- name: backfill_start :one
-- Start the run's row, running, or adopt the one it already has (a retry, or the
-- pending row the command wrote): started_at is kept from the first attempt, the
-- error of the last failed attempt cleared.
INSERT INTO ultimate_jobs_backfill AS pass (
    name, checksum, status, app_version, job_id, forced, rows, batches, error,
    started_at
)
VALUES (
    %(name)s::text,
    %(checksum)s::text,
    'running',
    %(app_version)s::text,
    %(job_id)s::uuid,
    %(forced)s::boolean,
    0,
    0,
    '',
    coalesce(%(now)s::timestamptz, now())
)
    ON CONFLICT (job_id) DO UPDATE
   SET status = 'running',
       started_at = coalesce(pass.started_at, excluded.started_at),
       completed_at = NULL,
       error = ''
RETURNING pass.id, pass.started_at;

-- name: backfill_progress :exec
-- Report one checkpointed batch: totals so far (absolute, so a replayed batch writes
-- the same numbers again) and the last primary key read.
UPDATE ultimate_jobs_backfill
   SET rows = %(rows)s::bigint,
       batches = %(batches)s::integer,
       last_cursor = %(last_cursor)s::jsonb
 WHERE id = %(id)s::bigint;

-- name: backfill_finish :exec
-- End an attempt's report: `done` stamps completed_at (the pass is complete; nothing
-- re-runs it without force); `failed` keeps the error, bounded, while the queue retries
-- the run or dead-letters it.
UPDATE ultimate_jobs_backfill
   SET status = %(status)s::text,
       completed_at = CASE
           WHEN %(status)s::text = 'done' THEN coalesce(%(now)s::timestamptz, now())
       END,
       error = left(coalesce(%(error)s::text, ''), 2000)
 WHERE id = %(id)s::bigint;

-- name: backfill_ledger :many
-- The one projection every surface reads (db_backfill --list and --pending,
-- pending_backfills(), the dry run), newest first. `status` is the row's, except that
-- a pending or running row whose job is finished without completing it (dead-lettered,
-- failed, cancelled) or gone is `failed`: a worker killed on its final attempt writes
-- nothing. Filters: `names` (NULL: every name), `newest` (only each name's newest
-- row), `status`, `job_ids` (NULL: every pass; else the passes of these jobs, what
-- the job views show, F2), `limit`.
SELECT ledger.id,
       ledger.name,
       ledger.checksum,
       ledger.status,
       ledger.app_version,
       ledger.job_id,
       ledger.job_state,
       ledger.forced,
       ledger.rows,
       ledger.batches,
       ledger.last_cursor,
       ledger.created_at,
       ledger.started_at,
       ledger.completed_at,
       ledger.error
  FROM (
           SELECT pass.id,
                  pass.name,
                  pass.checksum,
                  CASE
                      WHEN pass.status IN ('pending', 'running')
                       AND (job.id IS NULL
                            OR job.state IN ('done', 'failed', 'dead', 'cancelled'))
                      THEN 'failed'
                      ELSE pass.status
                  END AS status,
                  pass.app_version,
                  pass.job_id,
                  job.state AS job_state,
                  pass.forced,
                  pass.rows,
                  pass.batches,
                  pass.last_cursor::text AS last_cursor,  -- JSON text
                  pass.created_at,
                  pass.started_at,
                  pass.completed_at,
                  pass.error,
                  row_number() OVER (
                      PARTITION BY pass.name
                      ORDER BY pass.id DESC
                  ) AS recency
             FROM ultimate_jobs_backfill AS pass
             LEFT JOIN ultimate_jobs_job AS job
               ON job.id = pass.job_id
            WHERE %(names)s::text[] IS NULL
               OR pass.name = ANY(%(names)s::text[])
       ) AS ledger
 WHERE (NOT coalesce(%(newest)s::boolean, FALSE) OR ledger.recency = 1)
   AND (%(status)s::text IS NULL OR ledger.status = %(status)s::text)
   AND (%(job_ids)s::uuid[] IS NULL OR ledger.job_id = ANY(%(job_ids)s::uuid[]))
 ORDER BY ledger.id DESC
 LIMIT %(limit)s::integer;

-- name: backfill_watch :many
-- What `db_backfill --write --wait` polls: the run's job state and last error, with
-- its ledger row's progress when the pass has one. No row: the job is gone.
SELECT job.state,
       job.state IN ('done', 'failed', 'dead', 'cancelled') AS finished,
       job.attempt,
       job.max_attempts,
       job.error_code,
       job.last_error,
       pass.rows,
       pass.batches,
       pass.status
  FROM ultimate_jobs_job AS job
  LEFT JOIN ultimate_jobs_backfill AS pass
    ON pass.job_id = job.id
 WHERE job.id = %(job_id)s::uuid;
