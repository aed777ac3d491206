-- Statements on ultimate_jobs_job, in lifecycle order: enqueue, claim, heartbeat,
-- settle (complete, retry, bury, release), operator moves.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).

-- name: job_enqueue :many
-- Insert one row per array element (H3: a fixed number of parameters for any batch,
-- one statement). A row whose (name, tenant, idempotency_key) a LIVE job holds, or
-- whose id already names a job (an outbox re-publish), inserts nothing (J2, O2) and is
-- absent from the answer: the caller asks job_holders which job holds it.
-- A row due later than now is 'delayed', otherwise 'ready'. Waking workers is throttled
-- in the statement itself (see `woken`).
WITH input AS (
    SELECT i.*,
           coalesce(
               i.run_at,
               coalesce(%(now)s::timestamptz, now())
                   + make_interval(secs => coalesce(i.delay, 0))
           ) AS due
      FROM unnest(
               %(ids)s::uuid[],
               %(run_ids)s::uuid[],
               %(names)s::text[],
               %(queues)s::text[],
               %(priorities)s::smallint[],
               %(inputs)s::jsonb[],
               %(tenant_ids)s::text[],
               %(idempotency_keys)s::text[],
               %(max_attempts)s::integer[],
               %(run_ats)s::timestamptz[],
               %(delays)s::double precision[],
               %(correlation_ids)s::text[],
               %(enqueued_bys)s::text[]
           ) WITH ORDINALITY AS i(
               id, run_id, name, queue, priority, input, tenant_id, idempotency_key,
               max_attempts, run_at, delay, correlation_id, enqueued_by, ord
           )
),
inserted AS (
    INSERT INTO ultimate_jobs_job (
        id, run_id, name, queue, priority, state, input, tenant_id, idempotency_key,
        attempt, max_attempts, run_at, created_at, correlation_id, enqueued_by
    )
    SELECT input.id, input.run_id, input.name, input.queue, input.priority,
           CASE WHEN input.due > coalesce(%(now)s::timestamptz, now()) THEN 'delayed' ELSE 'ready' END,
           input.input, input.tenant_id, input.idempotency_key,
           0, input.max_attempts, input.due, coalesce(%(now)s::timestamptz, now()),
           input.correlation_id, input.enqueued_by
      FROM input
     ORDER BY input.ord
        ON CONFLICT DO NOTHING
    RETURNING id, queue, run_at
),
woken AS (
    -- N1: announce each queue that got a row due within 1 s, at most once per queue
    -- per 250 ms slot: not when a job of that queue created since the slot began is
    -- already visible (ids are UUIDv7, so the slot's first possible id bounds a
    -- primary-key range scan). Deduped rows inserted nothing and announce nothing.
    SELECT pg_notify('ultimate_jobs_wake', due.queue)
      FROM (
            SELECT DISTINCT inserted.queue
              FROM inserted
             WHERE inserted.run_at <= coalesce(%(now)s::timestamptz, now()) + interval '1 second'
           ) AS due
     WHERE NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_job AS job
                WHERE job.id >= (
                          lpad(to_hex((floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now())) * 4) * 250)::bigint), 12, '0')
                          || '00000000000000000000'
                      )::uuid
                  AND job.queue = due.queue
           )
)
-- Selecting wake.announced keeps `woken` in the plan (an unused join would be removed).
SELECT inserted.id, wake.announced
  FROM inserted
 CROSS JOIN (SELECT count(*) AS announced FROM woken) AS wake;

-- name: job_holders :many
-- For enqueued rows that inserted nothing: the job that holds each one's place, a
-- live job with the same (name, tenant, idempotency_key), else a job under the same
-- id (an outbox re-publish). No answer for a row means the holder finished in between:
-- the caller enqueues that row again.
SELECT wanted.ord, holder.id, holder.run_id
  FROM unnest(
           %(ids)s::uuid[],
           %(names)s::text[],
           %(tenant_ids)s::text[],
           %(idempotency_keys)s::text[]
       ) WITH ORDINALITY AS wanted(id, name, tenant_id, idempotency_key, ord)
 CROSS JOIN LATERAL (
        SELECT held.id, held.run_id
          FROM (
                SELECT job.id, job.run_id, 0 AS source
                  FROM ultimate_jobs_job AS job
                 WHERE job.name = wanted.name
                   AND coalesce(job.tenant_id, '') = coalesce(wanted.tenant_id, '')
                   AND job.idempotency_key = wanted.idempotency_key
                   AND job.state IN ('ready', 'delayed', 'running', 'suspended')
                 UNION ALL
                SELECT job.id, job.run_id, 1
                  FROM ultimate_jobs_job AS job
                 WHERE job.id = wanted.id
               ) AS held
         ORDER BY held.source
         LIMIT 1
       ) AS holder;

-- name: job_claim :many
-- Claim up to `limit` jobs for one worker across its queues and start their lease (W2).
-- Candidates are due 'ready' rows in priority order, 'delayed'/'suspended' rows whose
-- run_at passed, and 'running' rows whose lease lapsed (W5, the worker died). Paused
-- queues are skipped (L4). SKIP LOCKED lets many workers claim at once; MATERIALIZED
-- keeps each locking SELECT apart from the UPDATE, and the per-queue LATERAL lets each
-- queue use its partial index in order instead of sorting every due row.
-- Each claim stamps a fresh lease_owner token: every later write is fenced on it (W3).
-- Rows come back in claim order (priority, then age) so the worker starts them so.
-- A lapsed row already at its final attempt is not handed out: it is buried dead in
-- this same statement with LEASE_LAPSED_FINAL_ATTEMPT and returned with buried = true.
WITH served AS (
    SELECT q.queue
      FROM unnest(%(queues)s::text[]) AS q(queue)
     WHERE NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_queue_pause AS pause
                WHERE pause.queue = q.queue
           )
),
ready AS MATERIALIZED (
    SELECT candidate.id, candidate.priority, candidate.run_at, false AS exhausted
      FROM served
     CROSS JOIN LATERAL (
               SELECT job.id, job.priority, job.run_at
                 FROM ultimate_jobs_job AS job
                WHERE job.state = 'ready'
                  AND job.queue = served.queue
                  AND job.run_at <= coalesce(%(now)s::timestamptz, now())
                ORDER BY job.priority DESC, job.run_at, job.id
                LIMIT %(limit)s::integer
                  FOR UPDATE SKIP LOCKED
           ) AS candidate
),
woken AS MATERIALIZED (
    SELECT candidate.id, candidate.priority, candidate.run_at, false AS exhausted
      FROM served
     CROSS JOIN LATERAL (
               SELECT job.id, job.priority, job.run_at
                 FROM ultimate_jobs_job AS job
                WHERE job.state IN ('delayed', 'suspended')
                  AND job.queue = served.queue
                  AND job.run_at <= coalesce(%(now)s::timestamptz, now())
                ORDER BY job.run_at
                LIMIT %(limit)s::integer
                  FOR UPDATE SKIP LOCKED
           ) AS candidate
),
lapsed AS MATERIALIZED (
    SELECT job.id, job.priority, job.run_at, job.attempt >= job.max_attempts AS exhausted
      FROM ultimate_jobs_job AS job
     WHERE job.state = 'running'
       AND job.lease_expires_at < coalesce(%(now)s::timestamptz, now())
       AND job.queue IN (SELECT served.queue FROM served)
     ORDER BY job.lease_expires_at
     LIMIT %(limit)s::integer
       FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT candidate.id,
           row_number() OVER (
               ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
           ) AS position
      FROM (
            SELECT id, priority, run_at, exhausted FROM ready
             UNION ALL
            SELECT id, priority, run_at, exhausted FROM woken
             UNION ALL
            SELECT id, priority, run_at, exhausted FROM lapsed
           ) AS candidate
     WHERE NOT candidate.exhausted
     ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
     LIMIT %(limit)s::integer
),
buried AS (
    UPDATE ultimate_jobs_job AS job
       SET state = CASE WHEN job.name = ANY(%(dropped)s::text[]) THEN 'failed' ELSE 'dead' END,
           finished_at = coalesce(%(now)s::timestamptz, now()),
           lease_owner = NULL,
           lease_expires_at = NULL,
           last_error = 'LEASE_LAPSED_FINAL_ATTEMPT',
           error_code = '',
           stop_reason = 'attempts-exhausted'
      FROM lapsed
     WHERE job.id = lapsed.id
       AND lapsed.exhausted
    RETURNING job.id, job.run_id, job.name, job.queue, job.priority, job.state,
              job.input, job.tenant_id, job.idempotency_key, job.attempt,
              job.max_attempts, job.lease_owner, job.correlation_id, job.enqueued_by,
              job.created_at, job.started_at
),
claimed AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'running',
           attempt = job.attempt + 1,
           lease_owner = gen_random_uuid(),
           lease_expires_at = coalesce(%(now)s::timestamptz, now())
                              + make_interval(secs => %(lease_seconds)s::double precision),
           started_at = coalesce(%(now)s::timestamptz, now()),
           worker_id = %(worker_id)s::text
      FROM picked
     WHERE job.id = picked.id
    RETURNING job.id, job.run_id, job.name, job.queue, job.priority, job.state,
              job.input, job.tenant_id, job.idempotency_key, job.attempt,
              job.max_attempts, job.lease_owner, job.correlation_id, job.enqueued_by,
              job.created_at, job.started_at
)
SELECT answer.buried, answer.id, answer.run_id, answer.name, answer.queue,
       answer.priority, answer.state, answer.input, answer.tenant_id,
       answer.idempotency_key, answer.attempt, answer.max_attempts, answer.lease_owner,
       answer.correlation_id, answer.enqueued_by, answer.created_at, answer.started_at
  FROM (
        SELECT false AS buried, claimed.* FROM claimed
         UNION ALL
        SELECT true AS buried, buried.* FROM buried
       ) AS answer
  LEFT JOIN picked ON picked.id = answer.id
 ORDER BY picked.position NULLS LAST;

-- name: job_heartbeat :many
-- Renew the lease of every job this worker holds, in one statement (W4).
-- Fenced per row on (id, state = 'running', lease_owner) (W3): a row another worker
-- reclaimed, or an operator cancelled, is not renewed. The answer has one row per
-- input id: renewed, and the state the row is in now (NULL when it was removed).
WITH held AS (
    SELECT h.id, h.lease_owner
      FROM unnest(%(ids)s::uuid[], %(lease_owners)s::uuid[]) AS h(id, lease_owner)
),
renewed AS (
    UPDATE ultimate_jobs_job AS job
       SET lease_expires_at = coalesce(%(now)s::timestamptz, now())
                              + make_interval(secs => %(lease_seconds)s::double precision)
      FROM held
     WHERE job.id = held.id
       AND job.state = 'running'
       AND job.lease_owner = held.lease_owner
    RETURNING job.id
)
SELECT held.id,
       renewed.id IS NOT NULL AS renewed,
       job.state
  FROM held
  LEFT JOIN renewed ON renewed.id = held.id
  LEFT JOIN ultimate_jobs_job AS job ON job.id = held.id;

-- name: job_complete :many
-- Settle completed jobs as 'done', many in one statement (N3), each fenced on its own
-- claim (W3): a row whose lease another worker took, or that was cancelled, is left
-- alone and absent from the answer. Leaving the live states releases the key (J2).
UPDATE ultimate_jobs_job AS job
   SET state = 'done',
       finished_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       progress = coalesce(settled.progress, job.progress)
  FROM unnest(
           %(ids)s::uuid[],
           %(lease_owners)s::uuid[],
           %(progresses)s::jsonb[]
       ) AS settled(id, lease_owner, progress)
 WHERE job.id = settled.id
   AND job.state = 'running'
   AND job.lease_owner = settled.lease_owner
RETURNING job.id;

-- name: job_retry :many
-- A failed attempt with attempts left: back to the queue after `delay` seconds (R1, R2),
-- 'delayed' while it backs off ('ready' when the delay is zero). The attempt stays
-- counted. Fenced on the claim (W3).
UPDATE ultimate_jobs_job AS job
   SET state = CASE WHEN %(delay)s::double precision > 0 THEN 'delayed' ELSE 'ready' END,
       run_at = coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => %(delay)s::double precision),
       lease_owner = NULL,
       lease_expires_at = NULL,
       last_error = %(last_error)s::text,
       error_code = %(error_code)s::text,
       progress = coalesce(%(progress)s::jsonb, job.progress)
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id, job.run_at;

-- name: job_bury :many
-- A failed attempt that ends the job: 'dead' (dead-lettered, requeueable, R4) or
-- 'failed' (dead_letter=False, or refused). Keeps the input, the attempts, the last
-- error with its traceback and why it stopped. Fenced on the claim (W3).
UPDATE ultimate_jobs_job AS job
   SET state = %(state)s::text,
       finished_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       last_error = %(last_error)s::text,
       error_code = %(error_code)s::text,
       stop_reason = %(stop_reason)s::text,
       attempt = job.attempt - CASE WHEN %(uncount)s::boolean THEN 1 ELSE 0 END,
       progress = coalesce(%(progress)s::jsonb, job.progress)
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
   AND %(state)s::text IN ('dead', 'failed')
RETURNING job.id;

-- name: job_release :many
-- Hand a claimed job back to the queue, claimable at once, lease released (W6).
-- uncount = true for an interrupted attempt (the body stopped because of the drain):
-- the attempt is not counted. uncount = false for an abandoned one (the body ignored
-- its token until the drain deadline): the attempt stays counted. Fenced (W3).
UPDATE ultimate_jobs_job AS job
   SET state = 'ready',
       run_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       attempt = job.attempt - CASE WHEN %(uncount)s::boolean THEN 1 ELSE 0 END
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id;

-- name: job_requeue :many
-- Requeue ONE finished job (done, failed, dead, cancelled) as a fresh run: attempt 0,
-- due now, error cleared, a new run_id, its queue woken (N1). Refused (no row) when the
-- job is live, or when a live job of the same name and tenant now holds its key.
UPDATE ultimate_jobs_job AS job
   SET state = 'ready',
       attempt = 0,
       run_id = %(run_id)s::uuid,
       run_at = coalesce(%(now)s::timestamptz, now()),
       started_at = NULL,
       finished_at = NULL,
       worker_id = '',
       last_error = '',
       error_code = '',
       stop_reason = ''
 WHERE job.id = %(id)s::uuid
   AND job.state IN ('done', 'failed', 'dead', 'cancelled')
   AND NOT EXISTS (
           SELECT 1
             FROM ultimate_jobs_job AS live
            WHERE live.name = job.name
              AND coalesce(live.tenant_id, '') = coalesce(job.tenant_id, '')
              AND live.idempotency_key = job.idempotency_key
              AND live.state IN ('ready', 'delayed', 'running', 'suspended')
       )
RETURNING job.id, job.queue, pg_notify('ultimate_jobs_wake', job.queue) IS NULL AS announced;

-- name: job_cancel :many
-- Cancel ONE live job. A queued row is cancelled at once; a running one is cancelled
-- too, and its worker finds out at its next heartbeat (the fenced renewal no longer
-- matches), cancels the run's token, and its late settle matches nothing.
UPDATE ultimate_jobs_job AS job
   SET state = 'cancelled',
       finished_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       stop_reason = 'cancelled',
       last_error = %(reason)s::text
 WHERE job.id = %(id)s::uuid
   AND job.state IN ('ready', 'delayed', 'running', 'suspended')
RETURNING job.id;

-- name: job_promote :many
-- Make ONE job waiting on its run time due now ('delayed' or 'suspended' become ready),
-- and wake the workers of its queue (N1). A sleeping run's sleeps end now (S3), so its
-- replay goes on instead of suspending until the old wake time.
WITH promoted AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'ready',
           run_at = coalesce(%(now)s::timestamptz, now())
     WHERE job.id = %(id)s::uuid
       AND (job.state IN ('delayed', 'suspended')
            OR (job.state = 'ready' AND job.run_at > coalesce(%(now)s::timestamptz, now())))
    RETURNING job.id, job.queue
),
woken AS (
    UPDATE ultimate_jobs_step AS step
       SET wake_at = coalesce(%(now)s::timestamptz, now())
      FROM promoted
     WHERE step.job_id = promoted.id
       AND step.kind = 'sleep'
       AND step.status = 'waiting'
       AND NOT step.archived
       AND step.wake_at > coalesce(%(now)s::timestamptz, now())
)
SELECT promoted.id, promoted.queue, pg_notify('ultimate_jobs_wake', promoted.queue) IS NULL AS announced
  FROM promoted;

-- name: job_remove :many
-- Delete ONE job that is not running.
DELETE FROM ultimate_jobs_job AS job
 WHERE job.id = %(id)s::uuid
   AND job.state <> 'running'
RETURNING job.id;

-- name: job_bulk_candidates :many
-- The ids one bulk operator verb may move, oldest first, at most `limit` (P2: 1,000 per
-- call). For a requeue, a finished row whose key a live job holds is left out (it could
-- not move), and of several finished rows sharing one key only the oldest is taken,
-- so "call until remaining is zero" ends. `remaining` counts what a later call could
-- still move after these.
WITH matching AS (
    SELECT job.id, job.name, job.tenant_id, job.idempotency_key
      FROM ultimate_jobs_job AS job
     WHERE job.state = %(state)s::text
       AND (%(queue)s::text IS NULL OR job.queue = %(queue)s::text)
       AND (%(name)s::text IS NULL OR job.name = %(name)s::text)
       AND (%(tenant_id)s::text IS NULL OR job.tenant_id = %(tenant_id)s::text)
       AND (
            NOT %(requeue)s::boolean
            OR NOT EXISTS (
                   SELECT 1
                     FROM ultimate_jobs_job AS live
                    WHERE live.name = job.name
                      AND coalesce(live.tenant_id, '') = coalesce(job.tenant_id, '')
                      AND live.idempotency_key = job.idempotency_key
                      AND live.state IN ('ready', 'delayed', 'running', 'suspended')
               )
       )
),
movable AS (
    SELECT DISTINCT ON (
               CASE WHEN %(requeue)s::boolean THEN matching.name END,
               CASE WHEN %(requeue)s::boolean THEN coalesce(matching.tenant_id, '') END,
               CASE WHEN %(requeue)s::boolean THEN matching.idempotency_key ELSE matching.id::text END
           )
           matching.id
      FROM matching
     ORDER BY CASE WHEN %(requeue)s::boolean THEN matching.name END,
              CASE WHEN %(requeue)s::boolean THEN coalesce(matching.tenant_id, '') END,
              CASE WHEN %(requeue)s::boolean THEN matching.idempotency_key ELSE matching.id::text END,
              matching.id
)
SELECT movable.id,
       count(*) OVER () - least(count(*) OVER (), %(limit)s::integer) AS remaining
  FROM movable
 ORDER BY movable.id
 LIMIT %(limit)s::integer;
