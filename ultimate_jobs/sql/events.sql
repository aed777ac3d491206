-- Statements on ultimate_jobs_event: the event bus of wait_for_event (S4).
--
-- The bus has ONE clock, the database's: publications are stamped by it and waits
-- compare against it, so no process's own clock decides which answers count.
-- %(now)s replaces it in tests.

-- name: event_publish :many
-- Publish one event, matchable until `retention` seconds from now, and wake the runs
-- waiting for it in the same statement: every waiting wait_for_event of that name, of
-- the event's tenant, whose match the payload contains, for a job enqueued at or before
-- the publication, is flagged woken; a suspended job among them becomes due now and its
-- queue's workers are told (pg_notify, N1), so it resumes at once rather than at its
-- next event_poll. A job still running its wait is not touched (its heartbeat must not
-- wait for the caller's transaction): its suspension sees the flag and comes due at
-- once, and event_wake catches one that committed while this ran. Runs in the caller's
-- transaction, so the wake is delivered when the publication commits.
WITH stamp AS (
    SELECT coalesce(%(now)s::timestamptz, statement_timestamp()) AS at
),
published AS (
    INSERT INTO ultimate_jobs_event (name, payload, tenant_id, published_at, expires_at)
    SELECT %(name)s::text,
           %(payload)s::jsonb,
           %(tenant_id)s::text,
           stamp.at,
           stamp.at + make_interval(secs => %(retention)s::double precision)
      FROM stamp
    RETURNING id, name, payload, tenant_id, published_at
),
flagged AS (
    UPDATE ultimate_jobs_step AS step
       SET woken = true
      FROM published, ultimate_jobs_job AS job
     WHERE step.kind = 'event'
       AND step.status = 'waiting'
       AND step.event = published.name
       AND NOT step.archived
       AND published.payload @> step.match
       AND job.id = step.job_id
       AND job.tenant_id IS NOT DISTINCT FROM published.tenant_id
       AND job.created_at <= published.published_at
    RETURNING step.job_id
),
woken AS (
    UPDATE ultimate_jobs_job AS job
       SET run_at = coalesce(%(now)s::timestamptz, now())
     WHERE job.id IN (SELECT flagged.job_id FROM flagged)
       AND job.state = 'suspended'
    RETURNING job.queue
),
announced AS (
    SELECT pg_notify('ultimate_jobs_wake', due.queue)
      FROM (SELECT DISTINCT woken.queue FROM woken) AS due
)
SELECT published.id,
       (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM announced) AS announced
  FROM published;

-- name: event_wake :many
-- Run right after event_publish, in the same transaction, with a fresh snapshot: wake
-- the waits event_publish could not see or could not wake. A wait recorded while
-- event_publish ran (its first look may have missed the uncommitted event) is flagged
-- now; a suspension that committed while event_publish was blocked on its wait (so
-- event_publish still saw the job running) is woken now. Usually it changes nothing.
WITH published AS (
    SELECT event.id, event.name, event.payload, event.tenant_id, event.published_at
      FROM ultimate_jobs_event AS event
     WHERE event.id = %(id)s::bigint
),
flagged AS (
    UPDATE ultimate_jobs_step AS step
       SET woken = true
      FROM published, ultimate_jobs_job AS job
     WHERE step.kind = 'event'
       AND step.status = 'waiting'
       AND step.event = published.name
       AND NOT step.archived
       AND published.payload @> step.match
       AND job.id = step.job_id
       AND job.tenant_id IS NOT DISTINCT FROM published.tenant_id
       AND job.created_at <= published.published_at
    RETURNING step.job_id
),
woken AS (
    UPDATE ultimate_jobs_job AS job
       SET run_at = coalesce(%(now)s::timestamptz, now())
     WHERE job.id IN (SELECT flagged.job_id FROM flagged)
       AND job.state = 'suspended'
       AND job.run_at > coalesce(%(now)s::timestamptz, now())
    RETURNING job.queue
),
announced AS (
    SELECT pg_notify('ultimate_jobs_wake', due.queue)
      FROM (SELECT DISTINCT woken.queue FROM woken) AS due
)
SELECT (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM announced) AS announced;

-- name: event_purge :many
-- Delete up to `limit` expired events, oldest first; answers their ids. An expired
-- event matches no wait whether or not it has been purged yet.
DELETE FROM ultimate_jobs_event AS event
 WHERE event.id IN (
           SELECT expired.id
             FROM ultimate_jobs_event AS expired
            WHERE expired.expires_at <= coalesce(%(now)s::timestamptz, now())
            ORDER BY expired.expires_at
            LIMIT %(limit)s::integer
       )
RETURNING event.id;

-- name: event_reset :many
-- Delete every event: the testing seam (an event stays matchable until it expires, so
-- one test's publication would answer the next test's wait). Not for production.
DELETE FROM ultimate_jobs_event AS event
RETURNING event.id;
