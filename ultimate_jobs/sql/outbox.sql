-- Statements on ultimate_jobs_outbox, in lifecycle order: stage (in the caller's
-- transaction), claim, then mark published or release (the relay).
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).

-- name: outbox_stage :many
-- Stage one row per array element on the CALLER'S connection, inside its transaction
-- (O1): a rollback removes the rows with the business rows, a commit makes them
-- durable. The rows are job_enqueue's (job_input, H3), so the ids the enqueue answers
-- are the ids the relay publishes under. run_at is resolved here (a delay counts from the
-- enqueue, not from the publish). staged_tx records the staging transaction, so the
-- claim never lets a row overtake an earlier one of the same transaction (O3).
-- O5: announces the outbox channel, delivered on COMMIT, unless a committed row of
-- another transaction is already waiting unclaimed (the relay was told about that one
-- and looks again right after it). A rolled-back transaction announces nothing.
WITH input AS (
    {{job_input}}
),
staged AS (
    INSERT INTO ultimate_jobs_outbox (
        id, run_id, name, queue, priority, input, tenant_id, idempotency_key,
        max_attempts, run_at, correlation_id, enqueued_by, concurrency_key,
        redact, shown_key, parent_id, staged_at, staged_tx, claims
    )
    SELECT input.id, input.run_id, input.name, input.queue, input.priority,
           input.input, input.tenant_id, input.idempotency_key, input.max_attempts,
           input.due, input.correlation_id, input.enqueued_by, input.concurrency_key,
           input.redact, input.shown_key, input.parent_id,
           coalesce(%(now)s::timestamptz, now()),
           pg_current_xact_id()::text::bigint,
           0
      FROM input
     ORDER BY input.ord
    RETURNING id
),
woken AS (
    SELECT pg_notify('ultimate_jobs_outbox', '')
     WHERE NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_outbox AS waiting
                WHERE waiting.published_at IS NULL
                  AND waiting.claimed_by IS NULL
                  AND waiting.staged_tx <> pg_current_xact_id()::text::bigint
           )
)
-- Selecting wake.announced keeps `woken` in the plan (an unused CTE is not run).
SELECT staged.id, wake.announced
  FROM staged
 CROSS JOIN (SELECT count(*) AS announced FROM woken) AS wake;

-- name: outbox_claim :many
-- Claim up to `limit` committed, unpublished rows for one relay pass, in
-- (staged_at, id) order, and start their lease (O2): claimed_at and a claimed_by token
-- fresh for this pass, which every later write of the pass is fenced on. Rows held by
-- a live lease are skipped; rows whose lease lapsed (a relay died mid-batch) are taken
-- again, and `claims` counts every take.
-- SKIP LOCKED lets relays claim at once without waiting on each other; MATERIALIZED
-- keeps the locking SELECT apart from the UPDATE, so LIMIT cannot turn into a loop
-- that updates more rows than were picked.
-- O3: a row is claimed only together with (or after the publication of) every earlier
-- pending row of its own transaction, so two relays can never split one transaction
-- and publish its later job first. A row whose earlier pending sibling is not in this
-- pass (another relay holds it, or is claiming it right now) stays for a later pass.
-- Rows come back in (staged_at, id) order: the order they must be published in.
WITH candidate AS MATERIALIZED (
    SELECT outbox.id, outbox.staged_at, outbox.staged_tx
      FROM ultimate_jobs_outbox AS outbox
     WHERE outbox.published_at IS NULL
       AND (
               outbox.claimed_at IS NULL
               OR outbox.claimed_at <= coalesce(%(now)s::timestamptz, now())
                   - make_interval(secs => %(lease_seconds)s::double precision)
           )
     ORDER BY outbox.staged_at, outbox.id
     LIMIT %(limit)s::integer
       FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT candidate.id
      FROM candidate
     WHERE NOT EXISTS (
               SELECT 1
                 FROM ultimate_jobs_outbox AS earlier
                WHERE earlier.staged_tx = candidate.staged_tx
                  AND earlier.published_at IS NULL
                  AND (earlier.staged_at, earlier.id) < (candidate.staged_at, candidate.id)
                  AND earlier.id NOT IN (SELECT mine.id FROM candidate AS mine)
           )
),
claimed AS (
    UPDATE ultimate_jobs_outbox AS outbox
       SET claimed_at = coalesce(%(now)s::timestamptz, now()),
           claimed_by = %(claimed_by)s::text,
           claims = outbox.claims + 1
      FROM picked
     WHERE outbox.id = picked.id
    RETURNING outbox.id,
              outbox.run_id,
              outbox.name,
              outbox.queue,
              outbox.priority,
              outbox.input::text AS input,
              outbox.tenant_id,
              outbox.idempotency_key,
              outbox.max_attempts,
              outbox.run_at,
              outbox.correlation_id,
              outbox.enqueued_by,
              outbox.concurrency_key,
              outbox.redact::text AS redact,
              outbox.shown_key,
              outbox.parent_id,
              outbox.staged_at,
              outbox.claimed_by,
              outbox.claims
)
SELECT claimed.id,
       claimed.run_id,
       claimed.name,
       claimed.queue,
       claimed.priority,
       claimed.input,
       claimed.tenant_id,
       claimed.idempotency_key,
       claimed.max_attempts,
       claimed.run_at,
       claimed.correlation_id,
       claimed.enqueued_by,
       claimed.concurrency_key,
       claimed.redact,
       claimed.shown_key,
       claimed.parent_id,
       claimed.staged_at,
       claimed.claimed_by,
       claimed.claims
  FROM claimed
 ORDER BY claimed.staged_at, claimed.id;

-- name: outbox_mark_published :many
-- Stamp published_at on rows this pass published (O2). Fenced on claimed_by: a relay
-- that stalled past its lease and lost the rows to another relay owns nothing, and its
-- late mark retires none of them (the other relay has not necessarily published yet).
-- Answers the ids it marked.
UPDATE ultimate_jobs_outbox AS outbox
   SET published_at = coalesce(%(now)s::timestamptz, now())
 WHERE outbox.id = ANY(%(ids)s::uuid[])
   AND outbox.claimed_by = %(claimed_by)s::text
   AND outbox.published_at IS NULL
RETURNING outbox.id;

-- name: outbox_release :many
-- Hand rows of a stopped pass back at once (a failed publish stops the batch, O3), so
-- a database blip costs one poll interval and not a lease. Fenced on claimed_by like
-- the mark: a stalled relay's late release cannot unclaim rows another relay is
-- publishing. Answers the ids it released.
UPDATE ultimate_jobs_outbox AS outbox
   SET claimed_at = NULL,
       claimed_by = NULL
 WHERE outbox.id = ANY(%(ids)s::uuid[])
   AND outbox.claimed_by = %(claimed_by)s::text
   AND outbox.published_at IS NULL
RETURNING outbox.id;

-- name: outbox_set_aside :many
-- Retire rows this pass claimed but could not read (B4: a timestamp past year 9999, an
-- integer of thousands of digits, written by hand or by an older version): stamped
-- published_at, unpublished, with why in `error`, so they no longer stop the relay
-- and no longer hold back the later rows of their transaction (O3). Fenced on
-- claimed_by like the mark. Answers the ids it retired.
UPDATE ultimate_jobs_outbox AS outbox
   SET published_at = coalesce(%(now)s::timestamptz, now()),
       error = left(given.error, 1000)
  FROM unnest(%(ids)s::uuid[], %(errors)s::text[]) AS given(id, error)
 WHERE outbox.id = given.id
   AND outbox.claimed_by = %(claimed_by)s::text
   AND outbox.published_at IS NULL
RETURNING outbox.id;

-- name: outbox_deliver :many
-- Q1: publish rows an outbox on ANOTHER alias staged into this alias's queue, exactly
-- once. One statement, so one transaction: a receipt per staged row's id (the dedupe
-- key, ultimate_jobs_outbox_receipt) and the job rows of the ids that got a receipt
-- now. A relay killed after this statement and before it marked the source rows
-- delivers them again later and this statement finds every receipt taken: no job is
-- written twice, even for a job that already finished and was purged. A row whose
-- idempotency key a live job holds is received but inserts nothing (J2: deduped).
-- Concurrent deliveries of one id wait on the receipt's key; the second writes
-- nothing. Answers every id received now, whether it inserted a job; each queue that
-- got a job is announced (N1) once per statement. A child run.spawn staged here keeps
-- its parent_id (S10: listed with its parent's children; its settle wakes the parent).
WITH received AS (
    INSERT INTO ultimate_jobs_outbox_receipt (id, received_at)
    SELECT given.id, coalesce(%(now)s::timestamptz, now())
      FROM unnest(%(id)s::uuid[]) AS given(id)
        ON CONFLICT DO NOTHING
    RETURNING id
),
input AS (
    SELECT every.*
      FROM ({{job_input}}) AS every
     WHERE every.id IN (SELECT received.id FROM received)
),
inserted AS (
    {{job_insert}}
),
woken AS (
    SELECT pg_notify('ultimate_jobs_wake', due.queue)
      FROM (SELECT DISTINCT inserted.queue FROM inserted) AS due
)
SELECT received.id,
       received.id IN (SELECT inserted.id FROM inserted) AS inserted,
       wake.announced
  FROM received
 CROSS JOIN (SELECT count(*) AS announced FROM woken) AS wake;
