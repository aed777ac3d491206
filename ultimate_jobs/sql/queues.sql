-- Statements on ultimate_jobs_queue_pause: a pause is a row the claim reads (L4).

-- name: queue_pause :many
-- Pause a queue: every worker's next claim skips it; enqueues still land. Answers
-- the queue when this call paused it, nothing when it was paused already.
INSERT INTO ultimate_jobs_queue_pause (queue, paused_at, paused_by)
VALUES (%(queue)s::text, now(), %(paused_by)s::text)
    ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: queue_resume :many
-- Resume a paused queue; answers the queue when it was paused, and wakes its
-- workers (N1).
DELETE FROM ultimate_jobs_queue_pause AS pause
 WHERE pause.queue = %(queue)s::text
RETURNING pause.queue, pg_notify('ultimate_jobs_wake', pause.queue) IS NULL AS announced;

-- name: queue_stats :many
-- Jobs per (queue, state), the oldest ready job's age in seconds, and whether the
-- queue is paused, in one grouped read (a paused queue with no jobs appears with a
-- NULL state). The finished jobs the archive holds are added from
-- ultimate_jobs_archive_count (Q2: a move changes no count). For operators and
-- dashboards, not the hot path.
SELECT counted.queue,
       counted.state,
       sum(counted.jobs)::bigint AS jobs,
       max(counted.oldest_ready_seconds) AS oldest_ready_seconds,
       EXISTS (
           SELECT 1 FROM ultimate_jobs_queue_pause AS pause WHERE pause.queue = counted.queue
       ) AS paused
  FROM (
        SELECT job.queue,
               job.state,
               count(*) AS jobs,
               extract(epoch FROM now() - min(job.run_at) FILTER (WHERE job.state = 'ready'))
                   AS oldest_ready_seconds
          FROM ultimate_jobs_job AS job
         GROUP BY job.queue, job.state
         UNION ALL
        SELECT archived.queue, archived.state, sum(archived.jobs), NULL
          FROM ultimate_jobs_archive_count AS archived
         GROUP BY archived.queue, archived.state
         UNION ALL
        SELECT pause.queue, NULL, 0, NULL
          FROM ultimate_jobs_queue_pause AS pause
       ) AS counted
 GROUP BY counted.queue, counted.state
 ORDER BY counted.queue, counted.state;
