-- Read-only statements for Prometheus scrapes and readiness probes (M1, M3).
--
-- Each is one grouped read, whatever the number of queues or workers: a scrape every
-- few seconds from every web process and worker must stay cheap. They take no row
-- locks and write nothing.

-- name: queue_health :many
-- Per queue: depth (jobs due and waiting: 'ready', or 'delayed'/'suspended' whose
-- run_at passed, i.e. what the next claim could take), oldest_ready_seconds (how long
-- the longest-waiting of them has been due; 0 when none), running (claimed, lease
-- held), dead (dead letters: the hot table's, plus those the archive holds, read from
-- ultimate_jobs_archive_count, so a dead job moved to the archive is still counted,
-- Q2) and oldest_dead_seconds (how long ago the earliest dead letter of either table
-- died; 0 when none). One pass over the live and dead rows of the hot table through
-- the state indexes, one over the archive's counts (a row or two per queue, state and
-- day) and, per queue with archived dead letters, one probe of the archive's
-- (state, finished_at) index for the earliest; other finished rows are never read.
-- queues NULL means every queue; a queue without such rows is absent.
WITH hot AS (
    SELECT job.queue,
           count(*) FILTER (
               WHERE job.state IN ('ready', 'delayed', 'suspended')
                 AND job.run_at <= coalesce(%(now)s::timestamptz, now())
           ) AS depth,
           min(job.run_at) FILTER (
               WHERE job.state IN ('ready', 'delayed', 'suspended')
                 AND job.run_at <= coalesce(%(now)s::timestamptz, now())
           ) AS oldest_ready,
           count(*) FILTER (WHERE job.state = 'running') AS running,
           count(*) FILTER (WHERE job.state = 'dead') AS dead,
           min(job.finished_at) FILTER (WHERE job.state = 'dead') AS oldest_dead
      FROM ultimate_jobs_job AS job
     WHERE job.state IN ('ready', 'delayed', 'suspended', 'running', 'dead')
       AND (%(queues)s::text[] IS NULL OR job.queue = ANY(%(queues)s::text[]))
     GROUP BY job.queue
),
days AS (
    SELECT counted.queue, counted.day, sum(counted.jobs) AS jobs
      FROM ultimate_jobs_archive_count AS counted
     WHERE counted.state = 'dead'
       AND (%(queues)s::text[] IS NULL OR counted.queue = ANY(%(queues)s::text[]))
     GROUP BY counted.queue, counted.day
    HAVING sum(counted.jobs) > 0
),
archived AS (
    -- The earliest dead letter is read from the archive, on the first day that holds
    -- one: the (state, finished_at) index from that day's start, one queue's rows.
    SELECT days.queue,
           sum(days.jobs)::bigint AS dead,
           (SELECT min(archive.finished_at)
              FROM ultimate_jobs_job_archive AS archive
             WHERE archive.state = 'dead'
               AND archive.queue = days.queue
               AND archive.finished_at >= min(days.day)::timestamp AT TIME ZONE 'UTC'
               AND archive.finished_at
                   < (min(days.day) + 1)::timestamp AT TIME ZONE 'UTC') AS oldest_dead
      FROM days
     GROUP BY days.queue
)
SELECT coalesce(hot.queue, archived.queue) AS queue,
       coalesce(hot.depth, 0) AS depth,
       coalesce(
           extract(EPOCH FROM coalesce(%(now)s::timestamptz, now()) - hot.oldest_ready),
           0
       )::double precision AS oldest_ready_seconds,
       coalesce(hot.running, 0) AS running,
       coalesce(hot.dead, 0) + coalesce(archived.dead, 0) AS dead,
       coalesce(
           extract(EPOCH FROM coalesce(%(now)s::timestamptz, now())
                   - least(hot.oldest_dead, archived.oldest_dead)),
           0
       )::double precision AS oldest_dead_seconds
  FROM hot
  FULL JOIN archived ON archived.queue = hot.queue
 ORDER BY 1;

-- name: worker_live :many
-- The live workers of the registry (W8): rows whose expiry has not passed, with the
-- queues each serves, its last heartbeat, its slots and how many of them bodies past
-- their timeout still hold. A worker that stopped cleanly deleted its row; one that
-- died stops counting one lease after its last heartbeat.
SELECT worker.id, worker.queues, worker.heartbeat_at, worker.slots, worker.abandoned
  FROM ultimate_jobs_worker AS worker
 WHERE worker.expires_at > coalesce(%(now)s::timestamptz, now())
 ORDER BY worker.id;
