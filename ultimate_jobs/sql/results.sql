-- name: job_result_keep :many
-- Keep the JSON return value of a store_result=True body on its row (P8), written
-- while this attempt still holds the row: fenced on the claim (W3), so a worker whose
-- lease another took writes nothing. The settle that follows leaves `result` alone.
-- Only jobs that opt in pay this statement; every other completion writes none.
UPDATE ultimate_jobs_job AS job
   SET result = %(result)s::jsonb
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id;
