-- Read-only statements for Prometheus scrapes and readiness probes (M1, M3).
--
-- Each is one grouped read, whatever the number of queues or workers: a scrape every
-- few seconds from every web process and worker must stay cheap. They take no row
-- locks and write nothing.

-- name: queue_health :many
-- Per queue: depth (jobs due and waiting: 'ready', or 'delayed'/'suspended' whose
-- run_at passed, i.e. what the next claim could take), oldest_ready_seconds (how long
-- the longest-waiting of them has been due; 0 when none), running (claimed, lease
-- held) and dead (dead letters). One pass over the live and dead rows through the
-- state indexes, grouped by queue; finished rows are never read (queue_stats, for
-- operators, counts every state). queues NULL means every queue; a queue without
-- such rows is absent from the answer.
SELECT job.queue,
       count(*) FILTER (
           WHERE job.state IN ('ready', 'delayed', 'suspended')
             AND job.run_at <= coalesce(%(now)s::timestamptz, now())
       ) AS depth,
       coalesce(
           extract(EPOCH FROM
               coalesce(%(now)s::timestamptz, now())
               - min(job.run_at) FILTER (
                     WHERE job.state IN ('ready', 'delayed', 'suspended')
                       AND job.run_at <= coalesce(%(now)s::timestamptz, now())
                 )
           ),
           0
       )::double precision AS oldest_ready_seconds,
       count(*) FILTER (WHERE job.state = 'running') AS running,
       count(*) FILTER (WHERE job.state = 'dead') AS dead
  FROM ultimate_jobs_job AS job
 WHERE job.state IN ('ready', 'delayed', 'suspended', 'running', 'dead')
   AND (%(queues)s::text[] IS NULL OR job.queue = ANY(%(queues)s::text[]))
 GROUP BY job.queue
 ORDER BY job.queue;

-- name: worker_live :many
-- The live workers of the registry (W8): rows whose expiry has not passed, with the
-- queues each serves, its last heartbeat, its slots and how many of them bodies past
-- their timeout still hold. A worker that stopped cleanly deleted its row; one that
-- died stops counting one lease after its last heartbeat.
SELECT worker.id, worker.queues, worker.heartbeat_at, worker.slots, worker.abandoned
  FROM ultimate_jobs_worker AS worker
 WHERE worker.expires_at > coalesce(%(now)s::timestamptz, now())
 ORDER BY worker.id;
