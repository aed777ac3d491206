-- Statements on ultimate_jobs_lease: the slots of fleet-wide concurrency limits (L1, L2).
--
-- A slot is taken by job_claim (sql/jobs.sql) in the statement that claims the run, and
-- renewed by job_heartbeat in the statement that renews the run's lease. A slot is HELD
-- while its lease has not lapsed and its holder (a claim token) is still the token of a
-- running job; anything else is a free slot the next claim may take over. The design
-- notes are in leases.py.

-- name: lease_holders :many
-- The runs holding the slots of one key, in slot order: a slot whose lease lapsed, or
-- whose holder settled, holds nothing and is not listed.
SELECT lease.slot,
       lease.holder,
       lease.job_id,
       lease.acquired_at,
       lease.expires_at
  FROM ultimate_jobs_lease AS lease
 WHERE lease.key = %(key)s::text
   AND lease.expires_at >= coalesce(%(now)s::timestamptz, now())
   AND EXISTS (
           SELECT 1
             FROM ultimate_jobs_job AS job
            WHERE job.id = lease.job_id
              AND job.state = 'running'
              AND job.lease_owner = lease.holder
       )
 ORDER BY lease.slot;

-- name: lease_release :many
-- Release the slots one run holds, after its outcome is written, and wake the workers
-- of its queue (N1) so a run waiting for the slot starts now rather than at the next
-- poll. Term-scoped: it matches the run's own claim token, so a slot another claim
-- already took over is left alone. (The settle alone already frees the slot: this
-- removes the row and announces it.)
WITH released AS (
    DELETE FROM ultimate_jobs_lease AS lease
     WHERE lease.holder = %(holder)s::uuid
    RETURNING lease.key
)
SELECT released.key,
       pg_notify('ultimate_jobs_wake', %(queue)s::text) IS NULL AS announced
  FROM released;

-- name: lease_purge :many
-- Delete up to `batch` lapsed slots (a killed worker's, of keys no run asks for again).
-- A lapsed slot holds nothing, so deleting it changes no decision; SKIP LOCKED leaves
-- the rows a claim is taking over right now to that claim.
DELETE FROM ultimate_jobs_lease AS lease
 WHERE lease.id IN (
           SELECT stale.id
             FROM ultimate_jobs_lease AS stale
            WHERE stale.expires_at < coalesce(%(now)s::timestamptz, now())
            ORDER BY stale.expires_at
            LIMIT %(batch)s::integer
              FOR UPDATE SKIP LOCKED
       )
RETURNING lease.key, lease.slot;

-- name: job_key_store :many
-- A claimed run of a keyed job whose row carries no concurrency key (enqueued by a
-- path that did not compute it, or before the job declared its key): store the key
-- computed from the input and hand the row back, due now, attempt not counted, so the
-- next claim decides on it in SQL like any other. Fenced on the claim (W3).
UPDATE ultimate_jobs_job AS job
   SET concurrency_key = %(concurrency_key)s::text,
       state = 'ready',
       run_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       attempt = job.attempt - 1
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id;
