-- Statements on ultimate_jobs_queue_pause: a pause is a row the claim reads (L4).

-- name: queue_pause :exec
-- Pause a queue: every worker's next claim skips it; enqueues still land.
INSERT INTO ultimate_jobs_queue_pause (queue, paused_at, paused_by)
VALUES (%(queue)s::text, now(), %(paused_by)s::text)
    ON CONFLICT (queue) DO NOTHING;

-- name: queue_resume :many
-- Resume a paused queue; answers the queue when it was paused, and wakes its
-- workers (N1).
DELETE FROM ultimate_jobs_queue_pause AS pause
 WHERE pause.queue = %(queue)s::text
RETURNING pause.queue, pg_notify('ultimate_jobs_wake', pause.queue) IS NULL AS announced;
