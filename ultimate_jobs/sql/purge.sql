-- Statements of the purge (F3) and of job retention (F6).
--
-- Every delete here is bounded: it removes at most `batch` rows and answers how many it
-- removed, so a pass is a loop of short statements, each its own transaction in a
-- worker, and never one long delete holding locks on a large table. Each has a `_left`
-- twin that counts (up to `bound`) what the same rule still matches, read only when a
-- pass stops at its cap, for the log line that says what is left.
--
-- Time is one reading per pass (purge_clock), passed to every statement as %(now)s:
-- every target of a pass judges "expired" against the same instant.

-- name: purge_clock :one
-- The clock reading of one purge pass: the database's now(), or the testing clock.
SELECT coalesce(%(now)s::timestamptz, now()) AS now;

-- fragment: purge_rules
-- The days rules of a pass as rows (name, state, keep_seconds): they come as three
-- arrays, one entry per (job name, final state, seconds kept), so one statement
-- applies every days rule of every job (job_purge_aged, archive_purge_aged).
SELECT rule.name, rule.state, rule.keep_seconds
  FROM unnest(
           %(names)s::text[],
           %(states)s::text[],
           %(keep_seconds)s::double precision[]
       ) AS rule(name, state, keep_seconds)

-- name: job_purge_names :many
-- Every job name that has rows, in name order: a loose index scan (one probe of the
-- (name, state, finished_at) index per distinct name), so it costs the number of names
-- and not the number of rows. Names no job declares any more are listed too: their
-- rows keep the default retention (F6) rather than being deleted.
WITH RECURSIVE seen AS (
    (
        SELECT job.name
          FROM ultimate_jobs_job AS job
         ORDER BY job.name
         LIMIT 1
    )
    UNION ALL
    SELECT (
               SELECT job.name
                 FROM ultimate_jobs_job AS job
                WHERE job.name > seen.name
                ORDER BY job.name
                LIMIT 1
           )
      FROM seen
     WHERE seen.name IS NOT NULL
)
SELECT seen.name
  FROM seen
 WHERE seen.name IS NOT NULL;

-- name: job_purge_aged :one
-- Delete up to `batch` finished jobs older than their `days` rule (F6), oldest first.
-- The rules come as three arrays, one entry per (job name, final state, seconds kept),
-- so ONE statement applies every days rule of every job; a `False` rule is 0 seconds
-- (nothing finished before the pass's clock reading is kept). Each rule reads its own
-- range of the (name, state, finished_at) index. Guarantees:
--  * only rows in the rule's final state go: a live job is never touched, and a row
--    requeued since the pass read it is skipped (SKIP LOCKED, then the state re-check);
--  * a job whose outbox row is not yet marked published is kept: the relay may still
--    publish that id again, and a missing row would make it run twice (O2);
--  * deleting a job deletes its steps (the step table's ON DELETE CASCADE) and the
--    concurrency lease rows that still name it (S8, L1).
WITH rule AS (
    {{purge_rules}}
),
doomed AS (
    SELECT aged.id
      FROM rule
     CROSS JOIN LATERAL (
               SELECT job.id
                 FROM ultimate_jobs_job AS job
                WHERE job.name = rule.name
                  AND job.state = rule.state
                  AND job.state IN ('done', 'failed', 'dead', 'cancelled')
                  AND job.finished_at < coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => rule.keep_seconds)
                  AND NOT EXISTS (
                          SELECT 1
                            FROM ultimate_jobs_outbox AS outbox
                           WHERE outbox.id = job.id
                             AND outbox.published_at IS NULL
                      )
                ORDER BY job.finished_at
                LIMIT %(batch)s::integer
                  FOR UPDATE SKIP LOCKED
           ) AS aged
     LIMIT %(batch)s::integer
),
gone AS (
    DELETE FROM ultimate_jobs_job AS job
     USING doomed
     WHERE job.id = doomed.id
    RETURNING job.id
),
slots AS (
    DELETE FROM ultimate_jobs_lease AS lease
     WHERE lease.job_id IN (SELECT gone.id FROM gone)
    RETURNING lease.id
)
SELECT (SELECT count(*) FROM gone) AS deleted,
       (SELECT count(*) FROM slots) AS slots;

-- name: job_purge_aged_left :one
-- What job_purge_aged still matches, counted up to `bound` per rule (the log line of
-- a pass that stopped at its cap).
WITH rule AS (
    {{purge_rules}}
)
SELECT count(*) AS left
  FROM rule
 CROSS JOIN LATERAL (
           SELECT 1
             FROM ultimate_jobs_job AS job
            WHERE job.name = rule.name
              AND job.state = rule.state
              AND job.state IN ('done', 'failed', 'dead', 'cancelled')
              AND job.finished_at < coalesce(%(now)s::timestamptz, now())
                  - make_interval(secs => rule.keep_seconds)
            LIMIT %(bound)s::integer
       ) AS aged;

-- name: job_purge_beyond_last :one
-- Delete up to `batch` finished jobs of ONE (name, final state) beyond the newest
-- `last` of them (a `last` rule, F6), oldest first: the newest `last` rows by
-- (finished_at, id) are kept; the oldest of them is the boundary, and rows before it
-- go (both read from the (name, state, finished_at) index). Guarantees: only rows
-- still in that state go (a row requeued meanwhile is re-checked by the DELETE and
-- skipped); a row finishing meanwhile is newer than the boundary, so kept; a job
-- whose outbox row is not yet marked published is kept (see job_purge_aged); a job's
-- steps and its lease rows go with it.
WITH boundary AS (
    SELECT job.finished_at, job.id
      FROM ultimate_jobs_job AS job
     WHERE job.name = %(name)s::text
       AND job.state = %(state)s::text
       AND job.state IN ('done', 'failed', 'dead', 'cancelled')
     ORDER BY job.finished_at DESC, job.id DESC
    OFFSET %(last)s::integer - 1
     LIMIT 1
),
doomed AS (
    SELECT job.id
      FROM ultimate_jobs_job AS job, boundary
     WHERE job.name = %(name)s::text
       AND job.state = %(state)s::text
       AND job.state IN ('done', 'failed', 'dead', 'cancelled')
       AND (job.finished_at, job.id) < (boundary.finished_at, boundary.id)
       AND NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_outbox AS outbox
                WHERE outbox.id = job.id
                  AND outbox.published_at IS NULL
           )
     ORDER BY job.finished_at, job.id
     LIMIT %(batch)s::integer
),
gone AS (
    DELETE FROM ultimate_jobs_job AS job
     USING doomed
     WHERE job.id = doomed.id
       AND job.state = %(state)s::text
    RETURNING job.id
),
slots AS (
    DELETE FROM ultimate_jobs_lease AS lease
     WHERE lease.job_id IN (SELECT gone.id FROM gone)
    RETURNING lease.id
)
SELECT (SELECT count(*) FROM gone) AS deleted,
       (SELECT count(*) FROM slots) AS slots;

-- name: job_purge_beyond_last_left :one
-- What job_purge_beyond_last still matches for one (name, state): the rows beyond
-- the newest `last`, counted up to `bound`.
SELECT greatest(count(*) - %(last)s::integer, 0) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_job AS job
            WHERE job.name = %(name)s::text
              AND job.state = %(state)s::text
              AND job.state IN ('done', 'failed', 'dead', 'cancelled')
            LIMIT %(bound)s::integer + %(last)s::integer
       ) AS finished;

-- name: outbox_purge_published :one
-- Delete up to `batch` outbox rows published more than `keep_seconds` before the
-- pass's clock, oldest first (O5: published rows are the audit trail until then). A
-- row not yet published is never touched: it is a job still waiting for the relay.
-- SKIP LOCKED leaves a row a relay is writing to that relay.
WITH gone AS (
    DELETE FROM ultimate_jobs_outbox AS outbox
     WHERE outbox.id IN (
               SELECT published.id
                 FROM ultimate_jobs_outbox AS published
                WHERE published.published_at IS NOT NULL
                  AND published.published_at < coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => %(keep_seconds)s::double precision)
                ORDER BY published.published_at
                LIMIT %(batch)s::integer
                  FOR UPDATE SKIP LOCKED
           )
    RETURNING outbox.id
)
SELECT count(*) AS deleted
  FROM gone;

-- name: outbox_purge_published_left :one
-- What outbox_purge_published still matches, counted up to `bound`.
SELECT count(*) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_outbox AS published
            WHERE published.published_at IS NOT NULL
              AND published.published_at < coalesce(%(now)s::timestamptz, now())
                  - make_interval(secs => %(keep_seconds)s::double precision)
            LIMIT %(bound)s::integer
       ) AS aged;

-- name: worker_purge :one
-- Delete up to `batch` worker registry rows whose expiry passed (W8): a worker that
-- stopped beating. Every live worker's beat also deletes them; this covers a fleet
-- where none is left to beat. A live worker's row is never touched (its expiry is
-- ahead); SKIP LOCKED leaves a row its worker is renewing right now to that worker.
WITH gone AS (
    DELETE FROM ultimate_jobs_worker AS worker
     WHERE worker.id IN (
               SELECT expired.id
                 FROM ultimate_jobs_worker AS expired
                WHERE expired.expires_at < coalesce(%(now)s::timestamptz, now())
                ORDER BY expired.expires_at
                LIMIT %(batch)s::integer
                  FOR UPDATE SKIP LOCKED
           )
    RETURNING worker.id
)
SELECT count(*) AS deleted
  FROM gone;

-- name: worker_purge_left :one
-- What worker_purge still matches, counted up to `bound`.
SELECT count(*) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_worker AS expired
            WHERE expired.expires_at < coalesce(%(now)s::timestamptz, now())
            LIMIT %(bound)s::integer
       ) AS aged;

-- name: event_purge_left :one
-- What event_purge (sql/events.sql) still matches, counted up to `bound`.
SELECT count(*) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_event AS expired
            WHERE expired.expires_at <= coalesce(%(now)s::timestamptz, now())
            LIMIT %(bound)s::integer
       ) AS aged;

-- name: lease_purge_left :one
-- What lease_purge (sql/leases.sql) still matches, counted up to `bound`.
SELECT count(*) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_lease AS stale
            WHERE stale.expires_at < coalesce(%(now)s::timestamptz, now())
            LIMIT %(bound)s::integer
       ) AS aged;

-- name: receipt_purge :one
-- Q1: delete up to `batch` outbox receipts older than `keep_seconds` before the pass's
-- clock, oldest first. A receipt guards a delivery until the relay marked its source
-- row, one lease later at most; it is kept as long as the published outbox rows are.
WITH gone AS (
    DELETE FROM ultimate_jobs_outbox_receipt AS receipt
     WHERE receipt.id IN (
               SELECT aged.id
                 FROM ultimate_jobs_outbox_receipt AS aged
                WHERE aged.received_at < coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => %(keep_seconds)s::double precision)
                ORDER BY aged.received_at
                LIMIT %(batch)s::integer
                  FOR UPDATE SKIP LOCKED
           )
    RETURNING receipt.id
)
SELECT count(*) AS deleted
  FROM gone;

-- name: receipt_purge_left :one
-- What receipt_purge still matches, counted up to `bound`.
SELECT count(*) AS left
  FROM (
           SELECT 1
             FROM ultimate_jobs_outbox_receipt AS aged
            WHERE aged.received_at < coalesce(%(now)s::timestamptz, now())
                  - make_interval(secs => %(keep_seconds)s::double precision)
            LIMIT %(bound)s::integer
       ) AS aged;
