-- Statements on ultimate_jobs_run_log: the log lines one attempt wrote through
-- run.logger (seed logMaxEntries), written once when the attempt ends.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.

-- name: run_log_write :exec
-- Keep one attempt's lines: ONE row per attempt, its lines as one JSON array, so an
-- attempt costs one INSERT however much it logged (and nothing when it logged
-- nothing: the executor does not call this then). Not fenced on the claim: the lines
-- of an attempt whose lease another worker took are still what that attempt did. A
-- job removed meanwhile inserts nothing (its log rows would be orphans); deleting a
-- job deletes its rows (ON DELETE CASCADE), so retention trims them with it (F6).
INSERT INTO ultimate_jobs_run_log (job_id, run_id, attempt, entries, dropped, written_at)
SELECT job.id, %(run_id)s::uuid, %(attempt)s::integer, %(entries)s::jsonb,
       %(dropped)s::integer, coalesce(%(now)s::timestamptz, now())
  FROM ultimate_jobs_job AS job
 WHERE job.id = %(job_id)s::uuid;
