-- Read-only statements of the operator console (the admin dashboard and queues page,
-- P7). They take no row locks and write nothing.

-- name: queue_overview :many
-- Per (queue, state) for the states an operator watches (ready, delayed, running,
-- suspended, dead): how many jobs, how many of them are due (ready, or delayed/suspended
-- whose run_at passed: the depth the metrics report, M1) and how long the
-- longest-waiting due job has waited. Finished rows other
-- than dead letters are never read, so the cost follows the live rows and the dead
-- letters (the state indexes), not the million done rows a busy table keeps. Dead
-- letters the archive holds are added from ultimate_jobs_archive_count (rows per
-- queue, state and day; Q2), so a move changes no number.
SELECT counted.queue,
       counted.state,
       sum(counted.jobs)::bigint AS jobs,
       sum(counted.due)::bigint AS due,
       max(counted.oldest_due_seconds) AS oldest_due_seconds
  FROM (
        SELECT job.queue,
               job.state,
               count(*) AS jobs,
               count(*) FILTER (
                   WHERE job.state IN ('ready', 'delayed', 'suspended')
                     AND job.run_at <= coalesce(%(now)s::timestamptz, now())
               ) AS due,
               extract(EPOCH FROM
                   coalesce(%(now)s::timestamptz, now())
                   - min(job.run_at) FILTER (
                         WHERE job.state IN ('ready', 'delayed', 'suspended')
                           AND job.run_at <= coalesce(%(now)s::timestamptz, now())
                     )
               )::double precision AS oldest_due_seconds
          FROM ultimate_jobs_job AS job
         WHERE job.state IN ('ready', 'delayed', 'running', 'suspended', 'dead')
         GROUP BY job.queue, job.state
         UNION ALL
        SELECT archived.queue, 'dead', sum(archived.jobs), 0, NULL
          FROM ultimate_jobs_archive_count AS archived
         WHERE archived.state = 'dead'
         GROUP BY archived.queue
       ) AS counted
 GROUP BY counted.queue, counted.state
 ORDER BY counted.queue, counted.state;

-- name: console_jit_off :one
-- JIT compilation off for the rest of this transaction only (set_config's is_local;
-- the server's setting is untouched). The dead-letter groups read each day partition of
-- the archive through a LIMIT the planner cannot see the end of, so at a million jobs
-- the plan is estimated above jit_above_cost and PostgreSQL spent ~480 ms compiling a
-- statement that runs in ~100 ms (the dashboard's 923 ms, issue 27). The worker's own
-- connections have JIT off already (db.py).
SELECT set_config('jit', 'off', true) AS setting;
