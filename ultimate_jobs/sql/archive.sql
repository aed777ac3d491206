-- Statements of the partitioned archive of finished jobs (Q2).
--
-- A finished job leaves ultimate_jobs_job for ultimate_jobs_job_archive (partitioned
-- by the UTC day of finished_at) once it has been finished for ARCHIVE_AFTER: the
-- scheduler leader runs archive_move in bounded batches (maintenance/archive.py). The
-- claim, the heartbeat, the settle and the acks never read the archive, so the hot path
-- is unchanged; the hot table then holds the live backlog and the last ARCHIVE_AFTER
-- of finished jobs. The readers look in the hot table first, then here.

-- fragment: archive_columns
-- The job row's columns, in the order both tables are written with.
id, run_id, name, queue, priority, state, input, tenant_id, idempotency_key, attempt,
max_attempts, run_at, created_at, started_at, finished_at, lease_owner,
lease_expires_at, worker_id, last_error, error_code, stop_reason, progress, result,
correlation_id, enqueued_by, concurrency_key, redact, shown_key, fingerprint,
parent_id

-- fragment: archive_uncount
-- Take the rows of a `gone` CTE (queue, state, finished_at: rows this statement
-- deletes from the archive) off the archive's counts (Q2, P7): one row per (queue,
-- state, UTC day) holding minus how many left. An INSERT only: it never waits.
INSERT INTO ultimate_jobs_archive_count (queue, state, day, jobs)
SELECT gone.queue, gone.state, (gone.finished_at AT TIME ZONE 'UTC')::date, -count(*)
  FROM gone
 GROUP BY 1, 2, 3
RETURNING ultimate_jobs_archive_count.id

-- fragment: archive_drop_doomed
-- The CTEs `gone` and `uncounted` of a purge of the archive: delete the rows of a
-- `doomed` CTE (id, finished_at: the partition key, so each row is found in its day)
-- and take them off the archive's counts (archive_uncount).
gone AS (
    DELETE FROM ultimate_jobs_job_archive AS archive
     USING doomed
     WHERE archive.id = doomed.id
       AND archive.finished_at = doomed.finished_at
    RETURNING archive.id, archive.queue, archive.state, archive.finished_at
),
uncounted AS (
    {{archive_uncount}}
)

-- name: archive_clock :one
-- The pass's clock reading (the database's now(), or the testing clock) and the first
-- finish time the hot table still holds a finished row for (NULL: none), one probe of
-- the (state, finished_at) index per final state: the days the partitions must cover.
SELECT coalesce(%(now)s::timestamptz, now()) AS now,
       least(
           (SELECT min(job.finished_at) FROM ultimate_jobs_job AS job
             WHERE job.state = 'done' AND job.finished_at IS NOT NULL),
           (SELECT min(job.finished_at) FROM ultimate_jobs_job AS job
             WHERE job.state = 'failed' AND job.finished_at IS NOT NULL),
           (SELECT min(job.finished_at) FROM ultimate_jobs_job AS job
             WHERE job.state = 'dead' AND job.finished_at IS NOT NULL),
           (SELECT min(job.finished_at) FROM ultimate_jobs_job AS job
             WHERE job.state = 'cancelled' AND job.finished_at IS NOT NULL)
       ) AS oldest;

-- name: archive_ensure :one
-- Create the missing day partitions from `first` to `last` (UTC days, both included);
-- answers how many it made. Idempotent, and safe against a concurrent caller (the
-- function of migrations 0006 and 0007 treats "already exists" as made by the other).
SELECT ultimate_jobs_archive_ensure(%(first)s::date, %(last)s::date) AS made;

-- name: archive_move :one
-- Move up to `batch` finished jobs, finished more than `after_seconds` before the
-- clock and at or after `covered` (the first day the caller made sure has a partition),
-- oldest first, from the hot table into the archive, in ONE statement, so a mover killed
-- at any point leaves each job in exactly one table. Guarantees:
--  * only finished rows move (done, failed, dead, cancelled), re-checked by the DELETE:
--    a job requeued since it was picked stays;
--  * SKIP LOCKED: two movers never take the same row, and a row a worker or an
--    operator holds right now is left for the next pass;
--  * a job whose outbox row is not yet marked published stays hot: the relay may
--    publish that id again and must find the row (O2);
--  * the job's steps, attempts and run-log lines go with it into `trail` (every part
--    of the statement reads the snapshot from before the delete, whose cascade then
--    removes the hot copies), and the concurrency lease rows that still name it go;
--  * a finish time with no partition makes the INSERT fail: the statement rolls back
--    and every row stays hot (nothing is lost, the caller creates the day);
--  * the archive's per-(queue, state, day) counts grow by what moved (Q2, P7), and
--    the count rows of those days are folded into one (SKIP LOCKED: never waits).
WITH picked AS (
    SELECT job.id
      FROM ultimate_jobs_job AS job
     WHERE job.state IN ('done', 'failed', 'dead', 'cancelled')
       AND job.finished_at < coalesce(%(now)s::timestamptz, now())
           - make_interval(secs => %(after_seconds)s::double precision)
       AND job.finished_at >= %(covered)s::timestamptz
       AND NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_outbox AS outbox
                WHERE outbox.id = job.id
                  AND outbox.published_at IS NULL
           )
     ORDER BY job.finished_at
     LIMIT %(batch)s::integer
       FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM ultimate_jobs_job AS job
     USING picked
     WHERE job.id = picked.id
       AND job.state IN ('done', 'failed', 'dead', 'cancelled')
    RETURNING job.*
),
kept AS (
    INSERT INTO ultimate_jobs_job_archive ({{archive_columns}}, trail, moved_at)
    SELECT {{archive_columns}},
           jsonb_build_object(
               'steps', coalesce((
                   SELECT jsonb_agg(to_jsonb(kept_step) ORDER BY kept_step.id)
                     FROM ultimate_jobs_step AS kept_step
                    WHERE kept_step.job_id = gone.id
               ), '[]'::jsonb),
               'attempts', coalesce((
                   SELECT jsonb_agg(to_jsonb(kept_attempt) ORDER BY kept_attempt.id)
                     FROM ultimate_jobs_attempt AS kept_attempt
                    WHERE kept_attempt.job_id = gone.id
               ), '[]'::jsonb),
               'logs', coalesce((
                   SELECT jsonb_agg(to_jsonb(kept_log) ORDER BY kept_log.id)
                     FROM ultimate_jobs_run_log AS kept_log
                    WHERE kept_log.job_id = gone.id
               ), '[]'::jsonb)
           ),
           coalesce(%(now)s::timestamptz, now())
      FROM gone
    RETURNING 1
),
slots AS (
    DELETE FROM ultimate_jobs_lease AS lease
     WHERE lease.job_id IN (SELECT gone.id FROM gone)
    RETURNING lease.id
),
folded AS (
    -- Q2, P7: the count rows of the days this move touches, folded into the one
    -- written below; a row another statement holds is left for a later move.
    DELETE FROM ultimate_jobs_archive_count AS counted
     WHERE counted.id IN (
               SELECT held.id
                 FROM ultimate_jobs_archive_count AS held
                WHERE (held.state, held.queue, held.day) IN (
                          SELECT gone.state, gone.queue,
                                 (gone.finished_at AT TIME ZONE 'UTC')::date
                            FROM gone
                      )
                  FOR UPDATE SKIP LOCKED
           )
    RETURNING counted.queue, counted.state, counted.day, counted.jobs
),
counted AS (
    -- The archive's counts grow by what moved, per (queue, state, UTC day).
    INSERT INTO ultimate_jobs_archive_count (queue, state, day, jobs)
    SELECT change.queue, change.state, change.day, sum(change.jobs)
      FROM (
            SELECT gone.queue, gone.state,
                   (gone.finished_at AT TIME ZONE 'UTC')::date AS day,
                   count(*) AS jobs
              FROM gone
             GROUP BY 1, 2, 3
             UNION ALL
            SELECT folded.queue, folded.state, folded.day, folded.jobs
              FROM folded
           ) AS change
     GROUP BY 1, 2, 3
    HAVING sum(change.jobs) <> 0
    RETURNING ultimate_jobs_archive_count.id
)
SELECT (SELECT count(*) FROM kept) AS moved;

-- name: archive_restore :one
-- Move ONE job back from the archive into the hot table, with its steps, attempts and
-- run-log lines (a retry of a job in the archive, P2): one statement, so the job is in
-- exactly one table whatever happens. The caller runs it in the transaction of the
-- retry: a refused requeue rolls the restore back too. One probe of each day's
-- primary key (id, finished_at): the id alone does not say the day. The archive's
-- counts lose the job (archive_uncount).
WITH gone AS (
    DELETE FROM ultimate_jobs_job_archive AS archive
     WHERE archive.id = %(id)s::uuid
    RETURNING archive.*
),
back AS (
    INSERT INTO ultimate_jobs_job ({{archive_columns}})
    SELECT {{archive_columns}}
      FROM gone
    RETURNING 1
),
steps AS (
    INSERT INTO ultimate_jobs_step
    SELECT step.*
      FROM gone
     CROSS JOIN LATERAL jsonb_populate_recordset(
               NULL::ultimate_jobs_step, gone.trail -> 'steps'
           ) AS step
    RETURNING 1
),
attempts AS (
    INSERT INTO ultimate_jobs_attempt
    SELECT attempt.*
      FROM gone
     CROSS JOIN LATERAL jsonb_populate_recordset(
               NULL::ultimate_jobs_attempt, gone.trail -> 'attempts'
           ) AS attempt
    RETURNING 1
),
logs AS (
    INSERT INTO ultimate_jobs_run_log
    SELECT log.*
      FROM gone
     CROSS JOIN LATERAL jsonb_populate_recordset(
               NULL::ultimate_jobs_run_log, gone.trail -> 'logs'
           ) AS log
    RETURNING 1
),
uncounted AS (
    {{archive_uncount}}
)
SELECT (SELECT count(*) FROM gone) AS restored,
       (SELECT count(*) FROM steps) AS steps,
       (SELECT count(*) FROM attempts) AS attempts,
       (SELECT count(*) FROM logs) AS logs;

-- name: archive_drop_before :one
-- Retention by the day (F6, Q2): drop every day partition of the archive that ends on or
-- before the start of `day` (a UTC date), answering how many rows they held. A day
-- goes whole: no row deletes, no WAL per row, nothing left to vacuum. The caller
-- chooses `day` so that no rule keeps any row of a dropped day (retention/jobs.py).
-- The counts of the dropped days go in the same statement (Q2, P7).
WITH uncounted AS (
    DELETE FROM ultimate_jobs_archive_count AS counted
     WHERE counted.day < %(day)s::date
    RETURNING counted.id
)
SELECT ultimate_jobs_archive_drop_before(%(day)s::date) AS dropped;

-- name: archive_pinned_since :one
-- The oldest finish time a `last`-only rule (F6 `{"last": n}`, no `days`) still
-- keeps: per (name, state, last), the newest `last` finished rows of the hot table
-- and the archive together. Days from this one on are not dropped whole. NULL: none.
WITH rule AS (
    SELECT rule.name, rule.state, rule.last
      FROM unnest(
               %(names)s::text[],
               %(states)s::text[],
               %(lasts)s::integer[]
           ) AS rule(name, state, last)
)
SELECT min(kept.finished_at) AS since
  FROM rule
 CROSS JOIN LATERAL (
           SELECT newest.finished_at
             FROM (
                      (SELECT job.finished_at
                         FROM ultimate_jobs_job AS job
                        WHERE job.name = rule.name
                          AND job.state = rule.state
                        ORDER BY job.finished_at DESC
                        LIMIT rule.last)
                      UNION ALL
                      (SELECT archive.finished_at
                         FROM ultimate_jobs_job_archive AS archive
                        WHERE archive.name = rule.name
                          AND archive.state = rule.state
                        ORDER BY archive.finished_at DESC
                        LIMIT rule.last)
                  ) AS newest
            ORDER BY newest.finished_at DESC
            LIMIT rule.last
       ) AS kept;

-- name: archive_purge_names :many
-- Every job name the archive holds, in name order: a loose index scan of the
-- (name, state, finished_at) index (one probe per name and day), as job_purge_names.
WITH RECURSIVE seen AS (
    (
        SELECT archive.name
          FROM ultimate_jobs_job_archive AS archive
         ORDER BY archive.name
         LIMIT 1
    )
    UNION ALL
    SELECT (
               SELECT archive.name
                 FROM ultimate_jobs_job_archive AS archive
                WHERE archive.name > seen.name
                ORDER BY archive.name
                LIMIT 1
           )
      FROM seen
     WHERE seen.name IS NOT NULL
)
SELECT seen.name
  FROM seen
 WHERE seen.name IS NOT NULL;

-- name: archive_purge_aged :one
-- job_purge_aged for the archive: delete up to `batch` rows of the archive older than their
-- `days` rule, oldest first, by row (the days no rule keeps whole were dropped first;
-- this is for a rule shorter than the longest, e.g. a job kept 1 day on a day another
-- job's rows keep). SKIP LOCKED leaves a row a retry is moving back to that retry.
WITH rule AS (
    {{purge_rules}}
),
doomed AS (
    SELECT aged.id, aged.finished_at
      FROM rule
     CROSS JOIN LATERAL (
               SELECT archive.id, archive.finished_at
                 FROM ultimate_jobs_job_archive AS archive
                WHERE archive.name = rule.name
                  AND archive.state = rule.state
                  AND archive.finished_at < coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => rule.keep_seconds)
                ORDER BY archive.finished_at
                LIMIT %(batch)s::integer
                  FOR UPDATE SKIP LOCKED
           ) AS aged
     LIMIT %(batch)s::integer
),
{{archive_drop_doomed}}
SELECT count(*) AS deleted
  FROM gone;

-- name: archive_purge_beyond_last :one
-- job_purge_beyond_last for the archive: delete up to `batch` rows of ONE (name, state)
-- of the archive beyond the newest `last` of that name and state in the hot table and
-- the archive together (the boundary is the oldest of those), oldest first.
WITH newest AS (
    SELECT both_tables.finished_at, both_tables.id
      FROM (
               (SELECT job.finished_at, job.id
                  FROM ultimate_jobs_job AS job
                 WHERE job.name = %(name)s::text
                   AND job.state = %(state)s::text
                 ORDER BY job.finished_at DESC, job.id DESC
                 LIMIT %(last)s::integer)
               UNION ALL
               (SELECT archive.finished_at, archive.id
                  FROM ultimate_jobs_job_archive AS archive
                 WHERE archive.name = %(name)s::text
                   AND archive.state = %(state)s::text
                 ORDER BY archive.finished_at DESC, archive.id DESC
                 LIMIT %(last)s::integer)
           ) AS both_tables
     ORDER BY both_tables.finished_at DESC, both_tables.id DESC
     LIMIT %(last)s::integer
),
boundary AS (
    SELECT newest.finished_at, newest.id
      FROM newest
     ORDER BY newest.finished_at, newest.id
     LIMIT 1
),
doomed AS (
    SELECT archive.id, archive.finished_at
      FROM ultimate_jobs_job_archive AS archive, boundary
     WHERE archive.name = %(name)s::text
       AND archive.state = %(state)s::text
       AND (archive.finished_at, archive.id) < (boundary.finished_at, boundary.id)
     ORDER BY archive.finished_at, archive.id
     LIMIT %(batch)s::integer
       FOR UPDATE OF archive SKIP LOCKED
),
{{archive_drop_doomed}}
SELECT count(*) AS deleted
  FROM gone;

-- name: archive_remove :many
-- Delete ONE job from the archive (an operator's remove, P2, of a job that moved): its
-- steps, attempts and run logs go with it (they are its trail). Answers its id, or
-- no row when the archive does not hold it.
-- The archive's counts lose the job (archive_uncount).
WITH gone AS (
    DELETE FROM ultimate_jobs_job_archive AS archive
     WHERE archive.id = %(id)s::uuid
    RETURNING archive.id, archive.queue, archive.state, archive.finished_at
),
uncounted AS (
    {{archive_uncount}}
)
SELECT gone.id
  FROM gone;
