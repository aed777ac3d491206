-- Dead-letter triage (P10): dead jobs grouped by the fingerprint of their last failed
-- attempt (the `fingerprint` column, ultimate_jobs_fingerprint of last_error, written
-- by the database: migration 0008), over the hot table and the archive.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.

-- name: triage_groups :many
-- The groups of dead jobs, largest first, at most `groups`. Which fingerprints exist
-- is read from the newest `scan` dead jobs of both tables (a bounded read backwards
-- through the (state, finished_at) indexes, no filter there that would steer the
-- planner to the fingerprint index; the function runs on those rows only); each group's
-- count, first and last finish time are then read from the fingerprint index over
-- EVERY dead job of both tables, each count stopping at `cap` (shown as "cap or
-- more"). `sample_id` is the newest dead job of the group. Bounded cost: `scan`
-- rows plus at most `groups` x `cap` index entries per table.
WITH newest AS (
    SELECT recent.id, recent.finished_at, recent.fingerprint
      FROM (
          (SELECT job.id, job.finished_at, job.fingerprint
             FROM ultimate_jobs_job AS job
            WHERE job.state = 'dead'
            ORDER BY job.finished_at DESC
            LIMIT %(scan)s::integer)
          UNION ALL
          (SELECT job.id, job.finished_at, job.fingerprint
             FROM ultimate_jobs_job_archive AS job
            WHERE job.state = 'dead'
            ORDER BY job.finished_at DESC
            LIMIT %(scan)s::integer)
      ) AS recent
     WHERE recent.fingerprint IS NOT NULL
     ORDER BY recent.finished_at DESC NULLS LAST
     LIMIT %(scan)s::integer
),
printed AS (
    SELECT newest.fingerprint,
           newest.id,
           newest.finished_at
      FROM newest
),
found AS (
    SELECT DISTINCT ON (printed.fingerprint)
           printed.fingerprint, printed.id AS sample_id
      FROM printed
     ORDER BY printed.fingerprint, printed.finished_at DESC NULLS LAST, printed.id DESC
)
SELECT found.fingerprint,
       found.sample_id,
       counted.jobs,
       counted.first_seen,
       counted.last_seen
  FROM found
 CROSS JOIN LATERAL (
       SELECT count(*)::integer AS jobs,
              min(every.finished_at) AS first_seen,
              max(every.finished_at) AS last_seen
         FROM (
             (SELECT job.finished_at
                FROM ultimate_jobs_job AS job
               WHERE job.fingerprint = found.fingerprint
                 AND job.state = 'dead'
               LIMIT %(cap)s::integer)
             UNION ALL
             (SELECT job.finished_at
                FROM ultimate_jobs_job_archive AS job
               WHERE job.fingerprint = found.fingerprint
                 AND job.state = 'dead'
               LIMIT %(cap)s::integer)
         ) AS every
     ) AS counted
 ORDER BY counted.jobs DESC, counted.last_seen DESC, found.fingerprint
 LIMIT %(groups)s::integer;
