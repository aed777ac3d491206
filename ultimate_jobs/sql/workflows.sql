-- Statements of fan-out and fan-in (S10, S11): run.spawn and run.wait_for_jobs.
--
-- Writes are fenced on the parent's claim like every step write (W3, the claim_held
-- fragment of steps.sql): they match the parent only while it is 'running' under the
-- caller's lease_owner, holding the row FOR KEY SHARE until they commit; no row
-- answered means the claim is lost and nothing was written. The wake of a waiting
-- parent is the deferred trigger ultimate_jobs_child_settled (migration 0009): it and
-- fanin_lock take the same transaction-level advisory lock, so a parent checking its
-- children and the settle of its last child never both miss each other.

-- name: spawn_record :many
-- Record run.spawn's steps (S10), one per child (`names`, `child_ids`, `adopt`,
-- `outputs`: one entry each), with the child's ids as output, and make the parent
-- the parent of each child its spawn wrote (`adopt`: not an existing job answered by
-- its idempotency key, nor a row staged for another alias). Runs in the transaction
-- that wrote the child rows, so children and checkpoints commit together or not at
-- all: a replay answers the same children and a crash never loses or doubles one. A
-- step already recorded under a name keeps its first output, which is answered.
-- Answers each name with its output (in no particular order).
WITH owner AS (
    {{claim_held}}
),
spawned AS (
    SELECT spawned.name, spawned.child_id, spawned.adopt, spawned.output, spawned.ord
      FROM unnest(
               %(names)s::text[],
               %(child_ids)s::uuid[],
               %(adopt)s::boolean[],
               %(outputs)s::text[]
           ) WITH ORDINALITY AS spawned(name, child_id, adopt, output, ord)
),
adopted AS (
    UPDATE ultimate_jobs_job AS child
       SET parent_id = owner.id
      FROM owner, spawned
     WHERE child.id = spawned.child_id
       AND spawned.adopt
       AND child.parent_id IS NULL
    RETURNING child.id
)
INSERT INTO ultimate_jobs_step (
    job_id, name, kind, status, output, attempt, started_at, finished_at
)
SELECT owner.id,
       spawned.name,
       'spawn',
       'done',
       spawned.output::jsonb,
       %(attempt)s::integer,
       coalesce(%(now)s::timestamptz, statement_timestamp()),
       coalesce(%(now)s::timestamptz, statement_timestamp())
  FROM owner, spawned
 ORDER BY spawned.ord
    ON CONFLICT (job_id, name) WHERE NOT archived
    DO UPDATE SET output = ultimate_jobs_step.output
RETURNING ultimate_jobs_step.name, ultimate_jobs_step.output::text AS output;

-- name: spawn_commit_async :one
-- Let the transaction of one run.spawn commit without waiting for its WAL flush
-- (synchronous_commit = off, for this transaction only): a spawn in a loop is then not
-- one disk flush per child. Safe for what S10 promises: the child row and its
-- checkpoint are in the same commit record, so a server crash keeps both or loses both
-- (the parent, still 'running' after the restart, replays and spawns again), and the
-- WAL is flushed in order, so any later synchronous commit (the child's claim, the
-- parent's next step, its suspension or settle) makes the spawn durable first: nothing
-- can act on a child whose spawn could still be lost.
SELECT set_config('synchronous_commit', 'off', true) AS setting;

-- name: fanin_wait :many
-- Start a run.wait_for_jobs (S11): the children's ids (a JSON array, in `match`) and
-- the deadline (the clock plus `timeout`; NULL for none) are recorded once, so a replay
-- keeps both. Answers the step as stored.
WITH owner AS (
    {{claim_held}}
)
INSERT INTO ultimate_jobs_step (
    job_id, name, kind, status, attempt, started_at, wake_at, match
)
SELECT owner.id,
       %(name)s::text,
       'jobs',
       'waiting',
       %(attempt)s::integer,
       coalesce(%(now)s::timestamptz, statement_timestamp()),
       coalesce(%(now)s::timestamptz, statement_timestamp())
           + make_interval(secs => %(timeout)s::double precision),
       %(children)s::jsonb
  FROM owner
    ON CONFLICT (job_id, name) WHERE NOT archived
    DO UPDATE SET match = ultimate_jobs_step.match
RETURNING ultimate_jobs_step.wake_at,
          ultimate_jobs_step.wake_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
              AS expired;

-- name: fanin_lock :one
-- Take the fan-in lock of parent `id` for the rest of the caller's transaction (the
-- one the trigger ultimate_jobs_child_settled takes at the commit of the parent's
-- child); the caller's next statement then reads the children with a snapshot that
-- sees every settle committed before it.
SELECT true AS locked
  FROM (
        SELECT pg_advisory_xact_lock(
                   hashtext('ultimate_jobs.fan_in'), hashtext(%(id)s::uuid::text)
               )
       ) AS held;

-- name: fanin_outcomes :many
-- Where each of `ids` is (S11), in the hot table or else the finished jobs table (Q2):
-- its state, stored result (store_result=True, P8) and the first line of its last
-- error (the exception's type and message, not the traceback). `staged` is true
-- for an id still waiting in this alias's outbox (a child on another alias, O1, not
-- yet relayed); `found` false and `staged` false: the id is not on this alias.
-- `ord` is the id's place in `ids` (1-based).
WITH wanted AS (
    SELECT wanted.id, wanted.ord
      FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS wanted(id, ord)
)
SELECT wanted.ord,
       wanted.id,
       coalesce(hot.state, cold.state) AS state,
       coalesce(hot.result, cold.result)::text AS result,
       split_part(coalesce(hot.last_error, cold.last_error), E'\n', 1) AS error,
       (hot.id IS NOT NULL OR cold.id IS NOT NULL) AS found,
       EXISTS (
           SELECT 1
             FROM ultimate_jobs_outbox AS outbox
            WHERE outbox.id = wanted.id
              AND outbox.published_at IS NULL
       ) AS staged
  FROM wanted
  LEFT JOIN ultimate_jobs_job AS hot ON hot.id = wanted.id
  LEFT JOIN LATERAL (
       SELECT finished.id, finished.state, finished.result, finished.last_error
         FROM ultimate_jobs_job_archive AS finished
        WHERE finished.id = wanted.id
          AND hot.id IS NULL
        LIMIT 1
  ) AS cold ON true
 ORDER BY wanted.ord;

-- name: fanin_end :many
-- End a waiting run.wait_for_jobs (S11): 'done' with the children's outcomes as
-- output, or 'timed_out' past its deadline. Recorded once: a replay answers it.
WITH owner AS (
    {{claim_held}}
)
UPDATE ultimate_jobs_step AS step
   SET status = %(status)s::text,
       output = %(output)s::jsonb,
       woken = false,
       finished_at = coalesce(%(now)s::timestamptz, statement_timestamp())
  FROM owner
 WHERE step.job_id = owner.id
   AND step.name = %(name)s::text
   AND NOT step.archived
   AND step.status = 'waiting'
RETURNING step.status, step.output::text AS output;

-- name: children_live :many
-- The live children of one job (S11: cancelling a parent cancels them), at most
-- `limit`, oldest first, through the live-children index.
SELECT child.id
  FROM ultimate_jobs_job AS child
 WHERE child.parent_id = %(parent_id)s::uuid
   AND child.state IN ('ready', 'delayed', 'running', 'suspended')
 ORDER BY child.id
 LIMIT %(limit)s::integer;

-- name: fanin_wake_settled :many
-- The testing seam (the testing runner, before each claim inside a test's transaction,
-- which never commits, so the deferred wake trigger never fires): make due now every
-- suspended parent whose wait_for_jobs is waiting and which has no live child left, as
-- the trigger would have at the last child's commit. Not for production.
UPDATE ultimate_jobs_job AS parent
   SET run_at = coalesce(%(now)s::timestamptz, now())
 WHERE parent.state = 'suspended'
   AND parent.run_at > coalesce(%(now)s::timestamptz, now())
   AND EXISTS (
           SELECT 1
             FROM ultimate_jobs_step AS step
            WHERE step.job_id = parent.id
              AND step.kind = 'jobs'
              AND step.status = 'waiting'
              AND NOT step.archived
       )
   AND NOT EXISTS (
           SELECT 1
             FROM ultimate_jobs_job AS child
            WHERE child.parent_id = parent.id
              AND child.state IN ('ready', 'delayed', 'running', 'suspended')
       )
RETURNING parent.id;

-- name: child_forestall :many
-- Cancel cascade (S11) for children of a cancelled parent still staged in the parent's
-- outbox for THIS alias (Q1, not yet relayed): take their delivery receipts here first,
-- so outbox_deliver finds every receipt taken and never writes these jobs (the relay
-- then marks the staged rows published, as for any receipt already taken). Answers the
-- ids forestalled now; an id not answered was delivered already (or by a delivery that
-- committed while this waited on the receipt's key): the caller cancels that job.
INSERT INTO ultimate_jobs_outbox_receipt (id, received_at)
SELECT given.id, statement_timestamp()
  FROM unnest(%(ids)s::uuid[]) AS given(id)
    ON CONFLICT DO NOTHING
RETURNING id;

-- name: fanin_away_settled :many
-- S11, Q1, on the alias where children settled: of `parent_ids` (parents that live on
-- another alias, named by job_complete / job_bury's away_parent_id), those with no live
-- child left here. Run after the settle committed, with a fresh snapshot: of two last
-- children settling at once, whichever asks later sees both settled, so at least one
-- of them wakes the parent (both may: a spurious wake costs the parent one re-check).
SELECT DISTINCT given.id
  FROM unnest(%(parent_ids)s::uuid[]) AS given(id)
 WHERE NOT EXISTS (
           SELECT 1
             FROM ultimate_jobs_job AS child
            WHERE child.parent_id = given.id
              AND child.state IN ('ready', 'delayed', 'running', 'suspended')
       );

-- name: fanin_wake_away :many
-- S11, Q1, on the PARENT's alias: what the trigger ultimate_jobs_child_settled does on
-- one database, for parents whose last child on another alias settled (committed
-- there before this runs). Flags each parent's waiting wait_for_jobs step woken and
-- makes a suspended parent due now, with a pg_notify to its queue (N1). Nothing for a
-- parent whose wait is not waiting (ended, or not started: it reads its children
-- itself). The parent's row is taken whether it is running or suspended, and its
-- run_at decided on the row's latest version: a suspension that commits while this
-- runs either comes first (this sees it suspended and makes it due) or finds the step
-- woken (job_suspend then parks it due now). Best-effort: the parent's event_poll
-- re-check is the guarantee. Answers the parents it made due.
WITH flagged AS (
    UPDATE ultimate_jobs_step AS step
       SET woken = true
     WHERE step.job_id = ANY(%(parent_ids)s::uuid[])
       AND step.kind = 'jobs'
       AND step.status = 'waiting'
       AND NOT step.archived
    RETURNING step.job_id
),
due AS (
    UPDATE ultimate_jobs_job AS parent
       SET run_at = CASE
               WHEN parent.state = 'suspended'
               THEN least(parent.run_at, coalesce(%(now)s::timestamptz, now()))
               ELSE parent.run_at
           END
     WHERE parent.id IN (SELECT flagged.job_id FROM flagged)
       AND parent.state IN ('running', 'suspended')
    RETURNING parent.id, parent.queue, parent.state
),
announced AS (
    SELECT pg_notify('ultimate_jobs_wake', woken.queue)
      FROM (SELECT DISTINCT due.queue FROM due WHERE due.state = 'suspended') AS woken
)
SELECT due.id, (SELECT count(*) FROM announced) AS announced
  FROM due
 WHERE due.state = 'suspended';
