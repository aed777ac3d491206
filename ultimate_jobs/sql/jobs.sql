-- Statements on ultimate_jobs_job, in lifecycle order: enqueue, claim, heartbeat,
-- settle (complete, retry, bury, release), operator moves.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).

-- fragment: job_input
-- The job rows to write, one per element of the arrays, in input order (`ord`): the
-- ONE column list of a job row, which job_enqueue, outbox_stage and scheduler_fire all
-- read; each array is named after its column, and JobRow (ultimate_jobs/enqueue/rows.py)
-- has the same fields. `due` is run_at, else now plus the delay (the outbox resolves it
-- at staging, so a delay counts from the enqueue, not from the publish).
SELECT i.*,
       coalesce(
           i.run_at,
           coalesce(%(now)s::timestamptz, now())
               + make_interval(secs => coalesce(i.delay, 0))
       ) AS due
  FROM unnest(
           %(id)s::uuid[],
           %(run_id)s::uuid[],
           %(name)s::text[],
           %(queue)s::text[],
           %(priority)s::smallint[],
           %(input)s::jsonb[],
           %(tenant_id)s::text[],
           %(idempotency_key)s::text[],
           %(max_attempts)s::integer[],
           %(run_at)s::timestamptz[],
           %(delay)s::double precision[],
           %(correlation_id)s::text[],
           %(enqueued_by)s::text[],
           %(concurrency_key)s::text[],
           %(redact)s::jsonb[],
           %(shown_key)s::text[],
           %(parent_id)s::uuid[]
       ) WITH ORDINALITY AS i(
           id, run_id, name, queue, priority, input, tenant_id, idempotency_key,
           max_attempts, run_at, delay, correlation_id, enqueued_by, concurrency_key,
           redact, shown_key, parent_id, ord
       )

-- fragment: job_input_shared
-- job_input for enqueue_many's batch (job_enqueue_many): the same rows, but a column of
-- one value down a batch of several rows (the name, the queue, a column of NULLs) may
-- travel as a one-element array: `one` reads that element once and every row takes it
-- (issue 26: no array of a thousand copies to send and parse). For a batch of one row
-- the element is the row's own value either way. The ids, the input and the key always
-- travel whole. (A fragment of its own: job_input's readers keep the INSERT within the
-- first kilobyte of their text, which pg_stat_activity shows.)
SELECT i.id, i.run_id,
       coalesce(one.name, i.name) AS name,
       coalesce(one.queue, i.queue) AS queue,
       coalesce(one.priority, i.priority) AS priority,
       i.input,
       coalesce(one.tenant_id, i.tenant_id) AS tenant_id,
       i.idempotency_key,
       coalesce(one.max_attempts, i.max_attempts) AS max_attempts,
       coalesce(one.run_at, i.run_at) AS run_at,
       coalesce(one.delay, i.delay) AS delay,
       coalesce(one.correlation_id, i.correlation_id) AS correlation_id,
       coalesce(one.enqueued_by, i.enqueued_by) AS enqueued_by,
       coalesce(one.concurrency_key, i.concurrency_key) AS concurrency_key,
       coalesce(one.redact, i.redact) AS redact,
       coalesce(one.shown_key, i.shown_key) AS shown_key,
       coalesce(one.parent_id, i.parent_id) AS parent_id,
       i.ord,
       coalesce(
           coalesce(one.run_at, i.run_at),
           coalesce(%(now)s::timestamptz, now())
               + make_interval(secs => coalesce(one.delay, i.delay, 0))
       ) AS due
  FROM unnest(
           %(id)s::uuid[],
           %(run_id)s::uuid[],
           %(name)s::text[],
           %(queue)s::text[],
           %(priority)s::smallint[],
           %(input)s::jsonb[],
           %(tenant_id)s::text[],
           %(idempotency_key)s::text[],
           %(max_attempts)s::integer[],
           %(run_at)s::timestamptz[],
           %(delay)s::double precision[],
           %(correlation_id)s::text[],
           %(enqueued_by)s::text[],
           %(concurrency_key)s::text[],
           %(redact)s::jsonb[],
           %(shown_key)s::text[],
           %(parent_id)s::uuid[]
       ) WITH ORDINALITY AS i(
           id, run_id, name, queue, priority, input, tenant_id, idempotency_key,
           max_attempts, run_at, delay, correlation_id, enqueued_by, concurrency_key,
           redact, shown_key, parent_id, ord
       )
 CROSS JOIN (
        SELECT CASE WHEN cardinality(%(name)s::text[]) = 1 THEN (%(name)s::text[])[1] END AS name,
               CASE WHEN cardinality(%(queue)s::text[]) = 1 THEN (%(queue)s::text[])[1] END AS queue,
               CASE WHEN cardinality(%(priority)s::smallint[]) = 1 THEN (%(priority)s::smallint[])[1] END AS priority,
               CASE WHEN cardinality(%(tenant_id)s::text[]) = 1 THEN (%(tenant_id)s::text[])[1] END AS tenant_id,
               CASE WHEN cardinality(%(max_attempts)s::integer[]) = 1 THEN (%(max_attempts)s::integer[])[1] END AS max_attempts,
               CASE WHEN cardinality(%(run_at)s::timestamptz[]) = 1 THEN (%(run_at)s::timestamptz[])[1] END AS run_at,
               CASE WHEN cardinality(%(delay)s::double precision[]) = 1 THEN (%(delay)s::double precision[])[1] END AS delay,
               CASE WHEN cardinality(%(correlation_id)s::text[]) = 1 THEN (%(correlation_id)s::text[])[1] END AS correlation_id,
               CASE WHEN cardinality(%(enqueued_by)s::text[]) = 1 THEN (%(enqueued_by)s::text[])[1] END AS enqueued_by,
               CASE WHEN cardinality(%(concurrency_key)s::text[]) = 1 THEN (%(concurrency_key)s::text[])[1] END AS concurrency_key,
               CASE WHEN cardinality(%(redact)s::jsonb[]) = 1 THEN (%(redact)s::jsonb[])[1] END AS redact,
               CASE WHEN cardinality(%(shown_key)s::text[]) = 1 THEN (%(shown_key)s::text[])[1] END AS shown_key,
               CASE WHEN cardinality(%(parent_id)s::uuid[]) = 1 THEN (%(parent_id)s::uuid[])[1] END AS parent_id
        OFFSET 0  -- read once, not per row: the planner keeps the subquery
       ) AS one

-- fragment: clock
-- The statement's one clock, a one-row `clock(now)`: the database's time, or the testing
-- clock's `now` when a test passes one. Joined as `CROSS JOIN {{clock}}`; the planner
-- flattens it, so `clock.now` plans as the expression itself.
(SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS clock

-- fragment: slot_held
-- True while the slot row `lease` is held by a live run (L1, L2): its holder is still
-- the claim token of a running job. Its expiry the caller checks against its clock.
EXISTS (
    SELECT 1
      FROM ultimate_jobs_job AS holder
     WHERE holder.id = lease.job_id
       AND holder.state = 'running'
       AND holder.lease_owner = lease.holder
)

-- fragment: queue_open
-- True unless the queue `q.queue` is paused (L4): the claims skip its rows.
NOT EXISTS (SELECT 1 FROM ultimate_jobs_queue_pause AS pause WHERE pause.queue = q.queue)

-- fragment: job_claimed
-- The columns of a claimed (or claim-settled) job row as the claims answer them
-- (ClaimedJob in sql/rows.py), from an UPDATE of `job`. The input is answered as its
-- JSON text (`::text`, the same text jsonb's output writes): read in C like any text
-- column, where a binary jsonb needs a Python loader (N2, issue 26).
job.id, job.run_id, job.name, job.queue, job.priority, job.state, job.input::text AS input,
job.tenant_id, job.idempotency_key, job.attempt, job.max_attempts, job.lease_owner,
job.correlation_id, job.enqueued_by, job.created_at, job.started_at

-- fragment: lease_start
-- The SET of a claim's UPDATE of the rows a `picked` CTE took, FROM picked and the
-- `clock` (W2, W3): running, one more attempt counted, the lease started under the
-- row's fresh claim token.
SET state = 'running',
    attempt = job.attempt + 1,
    lease_owner = picked.token,
    lease_expires_at = clock.now + make_interval(secs => %(lease_seconds)s::double precision),
    started_at = clock.now,
    worker_id = %(worker_id)s::text

-- fragment: bury_lapsed
-- Settle the rows of a `lapsed` CTE (id, exhausted) whose lease lapsed on their final
-- attempt (W5): dead (failed for a `dropped` name) with LEASE_LAPSED_FINAL_ATTEMPT, never
-- handed out again; answered in the claimed-job shape for the worker to announce.
UPDATE ultimate_jobs_job AS job
   SET state = CASE WHEN job.name = ANY(%(dropped)s::text[]) THEN 'failed' ELSE 'dead' END,
       finished_at = clock.now,
       lease_owner = NULL,
       lease_expires_at = NULL,
       last_error = 'LEASE_LAPSED_FINAL_ATTEMPT',
       error_code = '',
       stop_reason = 'attempts-exhausted'
  FROM lapsed
 CROSS JOIN {{clock}}
 WHERE job.id = lapsed.id
   AND lapsed.exhausted
RETURNING {{job_claimed}}, NULL::text AS lease_key

-- fragment: away_parent
-- In a settle's RETURNING of `job`: its parent's id when the job has a parent that is
-- not in this alias's hot table (a child run.spawn put on another alias, S10, Q1),
-- else NULL. The parent's wake on its own alias is then the settling worker's (the
-- wake trigger runs inside one database). A primary-key probe only for a child.
CASE
    WHEN job.parent_id IS NULL THEN NULL
    WHEN EXISTS (
             SELECT 1 FROM ultimate_jobs_job AS parent WHERE parent.id = job.parent_id
         ) THEN NULL
    ELSE job.parent_id
END AS away_parent_id

-- fragment: key_free
-- True when no live job (ready, delayed, running, suspended) of the name and tenant of
-- the row `job` holds its idempotency key (J3): a finished row may run again under it.
NOT EXISTS (
    SELECT 1
      FROM ultimate_jobs_job AS live
     WHERE live.name = job.name
       AND coalesce(live.tenant_id, '') = coalesce(job.tenant_id, '')
       AND live.idempotency_key = job.idempotency_key
       AND live.state IN ('ready', 'delayed', 'running', 'suspended')
)

-- fragment: job_insert
-- Insert the rows of an `input` CTE (job_input) into the queue, in input order. A row
-- due later than now is 'delayed', otherwise 'ready'. A row whose (name, tenant,
-- idempotency_key) a LIVE job holds, or whose id already names a job (an outbox
-- re-publish), inserts nothing (J2, O2).
INSERT INTO ultimate_jobs_job (
    id, run_id, name, queue, priority, state, input, tenant_id, idempotency_key,
    attempt, max_attempts, run_at, created_at, correlation_id, enqueued_by,
    concurrency_key, redact, shown_key, parent_id
)
SELECT input.id, input.run_id, input.name, input.queue, input.priority,
       CASE WHEN input.due > coalesce(%(now)s::timestamptz, now())
            THEN 'delayed' ELSE 'ready' END,
       input.input, input.tenant_id, input.idempotency_key,
       0, input.max_attempts, input.due, coalesce(%(now)s::timestamptz, now()),
       input.correlation_id, input.enqueued_by, input.concurrency_key,
       input.redact, input.shown_key, input.parent_id
  FROM input
 ORDER BY input.ord
    ON CONFLICT DO NOTHING
RETURNING id, queue, run_at

-- fragment: job_wake
-- N1: announce each queue that got a row due within 1 s from the `inserted` CTE
-- (job_insert), at most once per queue per 250 ms slot while the queue is backed up:
-- not when a job of that queue created since the slot began is visible and still
-- unclaimed ('ready'), since a worker woken for that one will find this one too. A job
-- the workers already took does not silence the next, so a quiet queue is announced
-- job by job. Ids are UUIDv7, so the slot's first possible id bounds a primary-key
-- range scan: the closed range and `state || ''` keep the planner off the ready index,
-- whose scan would read every ready row of the queue (4 ms per enqueue at a 40,000
-- backlog; the range reads only this slot's rows). Deduped rows inserted nothing and
-- announce nothing.
SELECT pg_notify('ultimate_jobs_wake', due.queue)
  FROM (
        SELECT DISTINCT inserted.queue
          FROM inserted
         WHERE inserted.run_at <= coalesce(%(now)s::timestamptz, now()) + interval '1 second'
       ) AS due
 WHERE NOT EXISTS (
           SELECT 1
             FROM ultimate_jobs_job AS job
            WHERE job.id BETWEEN (
                      lpad(to_hex((floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now())) * 4) * 250)::bigint), 12, '0')
                      || '00000000000000000000'
                  )::uuid AND 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid
              AND job.queue = due.queue
              AND job.state::text || '' = 'ready'
       )

-- fragment: job_enqueue_answer
-- The rest of job_enqueue after its `input` CTE: the insert, the wake, and the answer
-- (the wakes sent, the ordinals of the rows not written).
inserted AS (
    {{job_insert}}
),
woken AS (
    {{job_wake}}
)
-- Both are scalar subqueries of a one-row SELECT, so `woken` always runs (a CTE no
-- part of the answer reads would be left out of the plan). The ordinals are looked for
-- only when a row is missing: a subquery in the CASE's ELSE runs only when reached.
SELECT (SELECT count(*) FROM woken) AS announced,
       CASE
           WHEN (SELECT count(*) FROM inserted) = cardinality(%(id)s::uuid[])
           THEN '{}'::bigint[]
           ELSE coalesce(
               (SELECT array_agg(given.ord ORDER BY given.ord)
                  FROM unnest(%(id)s::uuid[]) WITH ORDINALITY AS given(id, ord)
                 WHERE NOT EXISTS (SELECT 1 FROM inserted WHERE inserted.id = given.id)),
               '{}'::bigint[]
           )
       END AS deduped

-- name: job_enqueue :one
-- Insert one row per array element (H3: a fixed number of parameters for any batch,
-- one statement). A row that a live job's key or an existing id holds inserts nothing:
-- the one row answered lists those rows' ordinals (1-based, in input order) as
-- `deduped`, and the caller asks job_holders which job holds each. The ids are made by
-- the client, so a written row needs no answer (issue 26: 1,000 ids were most of the
-- result). concurrency_key is the lease key of a keyed limit, computed from the input
-- (L2). Waking workers is throttled in the statement itself (job_wake).
WITH input AS (
    {{job_input}}
),
{{job_enqueue_answer}};

-- name: job_enqueue_many :one
-- job_enqueue for enqueue_many's own batch (issue 26): the same insert, wake and answer,
-- its input through job_input_shared, so a column every row shares travels once.
WITH input AS (
    {{job_input_shared}}
),
{{job_enqueue_answer}};

-- name: job_enqueue_one :one
-- job_enqueue for one row, the enqueue one by one (issue 26): the same insert (J1, J2,
-- O2) and wake (N1), its columns as scalar parameters (no arrays to pack for a single
-- row). Answers whether the row was written; not written, a live job's key or an
-- existing id holds it, and the caller asks job_holders which job.
WITH input AS (
    SELECT i.*,
           coalesce(
               i.run_at,
               coalesce(%(now)s::timestamptz, now())
                   + make_interval(secs => coalesce(i.delay, 0))
           ) AS due
      FROM (
            SELECT %(id)s::uuid AS id,
                   %(run_id)s::uuid AS run_id,
                   %(name)s::text AS name,
                   %(queue)s::text AS queue,
                   %(priority)s::smallint AS priority,
                   %(input)s::jsonb AS input,
                   %(tenant_id)s::text AS tenant_id,
                   %(idempotency_key)s::text AS idempotency_key,
                   %(max_attempts)s::integer AS max_attempts,
                   %(run_at)s::timestamptz AS run_at,
                   %(delay)s::double precision AS delay,
                   %(correlation_id)s::text AS correlation_id,
                   %(enqueued_by)s::text AS enqueued_by,
                   %(concurrency_key)s::text AS concurrency_key,
                   %(redact)s::jsonb AS redact,
                   %(shown_key)s::text AS shown_key,
                   %(parent_id)s::uuid AS parent_id,
                   1 AS ord
           ) AS i
),
inserted AS (
    {{job_insert}}
),
woken AS (
    {{job_wake}}
)
SELECT (SELECT count(*) FROM inserted) > 0 AS inserted,
       (SELECT count(*) FROM woken) AS announced;

-- name: job_holders :many
-- For enqueued rows that inserted nothing: the job that holds each one's place, a
-- live job with the same (name, tenant, idempotency_key), else a job under the same
-- id (an outbox re-publish). No answer for a row means the holder finished in between:
-- the caller enqueues that row again.
SELECT wanted.ord, holder.id, holder.run_id
  FROM unnest(
           %(id)s::uuid[],
           %(name)s::text[],
           %(tenant_id)s::text[],
           %(idempotency_key)s::text[]
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
-- Claim up to `limit` due 'ready' jobs for a worker that serves a capped job or runs
-- under a budget, and start their lease (W2; others use job_claim_plain). Only the
-- declared `names` are taken (NULL: any name, for the testing runner, which settles an
-- unknown one X_UNKNOWN_JOB). Only 'ready' rows: every time-driven move is job_stage's
-- (W5). Paused queues are skipped (L4); SKIP LOCKED lets workers claim side by side; a
-- fresh lease_owner token fences every later write (W3); rows come in claim order.
-- Limits (L1-L3, design notes in limits/slots.py): `cap_*` are the declared fleet caps
-- ('job': concurrency=N; 'wait'/'fail': a keyed Concurrency), `*_room(s)` what this
-- process's budgets still allow (NULL: no budget). Rows with no room are skipped inside
-- the scans, before the LIMIT. A capped run takes a free slot of its key (lease_key);
-- one whose slot another claim took stays ready. Under when_busy='fail' a run whose key
-- others hold is settled 'failed', X_JOB_KEY_BUSY, attempt not counted, refused = true.
-- Map (phase: CTEs, rules): inputs: served, cap, tenant_budget (L1-L4) -> room: held,
--   blocked (L1-L3) -> choose: ready, ranked, picked (W2) -> slots: vacant, slotted,
--   acquired (L1, L2) -> write: refused, claimed, counted (L2, W3, P5).
WITH served AS (
    SELECT q.queue, q.room
      FROM unnest(%(queues)s::text[], %(queue_rooms)s::integer[]) AS q(queue, room)
     WHERE coalesce(q.room, 1) > 0
       AND {{queue_open}}
),
cap AS (
    SELECT c.name, c.lim, c.mode
      FROM unnest(%(cap_names)s::text[], %(cap_limits)s::integer[], %(cap_modes)s::text[])
           AS c(name, lim, mode)
),
tenant_budget AS (
    SELECT t.tenant_id, t.room
      FROM unnest(%(tenant_ids)s::text[], %(tenant_rooms)s::integer[]) AS t(tenant_id, room)
),
held AS MATERIALIZED (
    -- Slots held now, per key of a capped job: not lapsed, and slot_held.
    SELECT lease.key, lease.name, count(*) AS taken
      FROM ultimate_jobs_lease AS lease
     CROSS JOIN {{clock}}
     WHERE lease.name IN (SELECT cap.name FROM cap)
       AND lease.expires_at >= clock.now
       AND {{slot_held}}
     GROUP BY lease.key, lease.name
),
blocked AS MATERIALIZED (
    -- What the scans skip: keys with no free slot (under 'fail' they are refused
    -- instead) and tenants this process has no room for.
    SELECT ARRAY(
               SELECT held.key::text
                 FROM held
                 JOIN cap ON cap.name = held.name
                WHERE held.taken >= cap.lim
                  AND cap.mode <> 'fail'
                  AND (cap.mode = 'job') = (held.key = 'job:' || cap.name)
           ) AS keys,
           ARRAY(SELECT t.tenant_id FROM tenant_budget AS t WHERE t.room <= 0) AS tenants
),
ready AS MATERIALIZED (
    SELECT candidate.id, candidate.queue, candidate.tenant_id, candidate.name, cap.lim,
           cap.mode, CASE cap.mode WHEN 'job' THEN 'job:' || candidate.name
                          ELSE candidate.concurrency_key END AS lease_key,
           row_number() OVER (
               ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
           ) AS rank
      FROM served
     CROSS JOIN blocked
     CROSS JOIN {{clock}}
     CROSS JOIN LATERAL (
               SELECT job.id, job.priority, job.run_at, job.name, job.queue,
                      job.tenant_id, job.concurrency_key
                 FROM ultimate_jobs_job AS job
                WHERE job.state = 'ready'
                  AND job.queue = served.queue
                  AND job.run_at <= clock.now
                  AND (%(names)s::text[] IS NULL OR job.name = ANY(%(names)s::text[]))
                  AND NOT ('job:' || job.name) = ANY(blocked.keys)
                  AND NOT coalesce(job.concurrency_key = ANY(blocked.keys), false)
                  AND NOT coalesce(job.tenant_id = ANY(blocked.tenants), false)
                ORDER BY job.priority DESC, job.run_at, job.id
                LIMIT least(%(limit)s::integer, served.room)
                  FOR UPDATE SKIP LOCKED
           ) AS candidate
      LEFT JOIN cap ON cap.name = candidate.name
),
ranked AS (
    -- Each candidate's place among the candidates of its key, queue and tenant.
    SELECT ready.id, ready.rank, ready.queue, ready.tenant_id, ready.name, ready.lim,
           ready.lease_key,
           coalesce(ready.mode = 'fail' AND held.taken >= ready.lim, false) AS refused,
           ready.lim - coalesce(held.taken, 0) AS free,
           row_number() OVER (PARTITION BY ready.lease_key ORDER BY ready.rank) AS key_rank,
           row_number() OVER (PARTITION BY ready.queue ORDER BY ready.rank) AS queue_rank,
           row_number() OVER (PARTITION BY ready.tenant_id ORDER BY ready.rank) AS tenant_rank
      FROM ready
      LEFT JOIN held ON held.key = ready.lease_key
),
picked AS MATERIALIZED (
    -- MATERIALIZED: the token is drawn once per row, for the slot and the claim alike.
    SELECT ranked.id, ranked.name, ranked.lim, ranked.lease_key, ranked.refused,
           gen_random_uuid() AS token, row_number() OVER (ORDER BY ranked.rank) AS position
      FROM ranked
      JOIN served ON served.queue = ranked.queue
      LEFT JOIN tenant_budget ON tenant_budget.tenant_id = ranked.tenant_id
     WHERE (ranked.lease_key IS NULL OR ranked.refused OR ranked.key_rank <= ranked.free)
       AND ranked.queue_rank <= coalesce(served.room, %(limit)s::integer)
       AND (ranked.tenant_id IS NULL
            OR ranked.tenant_rank <= coalesce(
                   tenant_budget.room, %(tenant_room)s::integer, %(limit)s::integer
               ))
     ORDER BY ranked.rank
     LIMIT %(limit)s::integer
),
vacant AS (
    -- The free slots of each key the picked runs need, numbered in slot order, with
    -- the holder seen in each (NULL: no row yet).
    SELECT wanted.key, slot.n AS slot, lease.holder AS seen,
           row_number() OVER (PARTITION BY wanted.key ORDER BY slot.n) AS nth
      FROM (SELECT DISTINCT picked.lease_key AS key, picked.lim
              FROM picked
             WHERE picked.lease_key IS NOT NULL AND NOT picked.refused) AS wanted
     CROSS JOIN {{clock}}
     CROSS JOIN LATERAL generate_series(0, wanted.lim - 1) AS slot(n)
      LEFT JOIN ultimate_jobs_lease AS lease
             ON lease.key = wanted.key
            AND lease.slot = slot.n
     WHERE lease.id IS NULL
        OR lease.expires_at < clock.now
        OR NOT {{slot_held}}
),
slotted AS (
    -- The n-th capped run of a key gets the n-th free slot of that key.
    SELECT mine.id, mine.name, mine.token, vacant.key, vacant.slot, vacant.seen
      FROM (SELECT picked.id, picked.name, picked.token, picked.lease_key,
                   row_number() OVER (PARTITION BY picked.lease_key ORDER BY picked.position)
                       AS nth
              FROM picked
             WHERE picked.lease_key IS NOT NULL AND NOT picked.refused) AS mine
      JOIN vacant
        ON vacant.key = mine.lease_key
       AND vacant.nth = mine.nth
),
acquired AS (
    -- One INSERT in (key, slot) order, so concurrent claims lock slots in one order. A
    -- row already there is taken over only while it names the holder this claim saw and
    -- is not held or lapsed on its latest version (a late heartbeat's renewal keeps it).
    INSERT INTO ultimate_jobs_lease AS lease
           (key, slot, name, holder, job_id, taken_from, acquired_at, expires_at)
    SELECT slotted.key, slotted.slot, slotted.name, slotted.token, slotted.id,
           slotted.seen, clock.now,
           clock.now + make_interval(secs => %(lease_seconds)s::double precision)
      FROM slotted
     CROSS JOIN {{clock}}
     ORDER BY slotted.key, slotted.slot
        ON CONFLICT (key, slot) DO UPDATE
       SET (name, holder, job_id, taken_from, acquired_at, expires_at) = (
               excluded.name, excluded.holder, excluded.job_id, excluded.taken_from,
               excluded.acquired_at, excluded.expires_at)
     WHERE lease.holder = excluded.taken_from
       AND (lease.expires_at < excluded.acquired_at OR NOT {{slot_held}})
    RETURNING lease.job_id
),
refused AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'failed', finished_at = clock.now,
           lease_owner = NULL, lease_expires_at = NULL,
           last_error = 'X_JOB_KEY_BUSY: every slot of ' || picked.lease_key
                        || ' is held by another run (limit ' || picked.lim || ')',
           error_code = 'X_JOB_KEY_BUSY',
           stop_reason = 'refused'
      FROM picked CROSS JOIN {{clock}}
     WHERE job.id = picked.id
       AND picked.refused
    RETURNING {{job_claimed}}, picked.lease_key
),
claimed AS (
    UPDATE ultimate_jobs_job AS job
       {{lease_start}}
      FROM picked
     CROSS JOIN {{clock}}
     WHERE job.id = picked.id
       AND NOT picked.refused
       AND (picked.lease_key IS NULL OR picked.id IN (SELECT job_id FROM acquired))
    RETURNING {{job_claimed}}, picked.lease_key
),
counted AS (
    -- P5: a refusal counts failed, with no duration.
    INSERT INTO ultimate_jobs_counter AS counter (name, tier, bucket, failed, dead)
    SELECT refused.name, 60, date_trunc('minute', clock.now), count(*), 0
      FROM refused CROSS JOIN {{clock}}
     GROUP BY refused.name, clock.now
     ORDER BY refused.name
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET failed = counter.failed + excluded.failed
    RETURNING counter.name
)
SELECT answer.*
  FROM (SELECT false AS refused, claimed.* FROM claimed
         UNION ALL
        SELECT true AS refused, refused.* FROM refused) AS answer
  JOIN picked ON picked.id = answer.id
 ORDER BY picked.position;

-- name: job_claim_plain :many
-- Claim up to `limit` due 'ready' jobs for one worker across its queues and start their
-- lease (W2): the claim of a worker none of whose served jobs declares a limit and that
-- has no budget (L1-L3 need job_claim). Rows of paused queues are skipped (L4), and
-- only the job names this worker declares (`names`) are taken: a name from another
-- deploy stays ready, its attempts untouched, for a worker that knows it. The per-queue
-- LATERAL walks each queue's partial ready index in priority order; SKIP LOCKED lets
-- many workers claim at once; MATERIALIZED draws each row's claim token once. Every
-- later write is fenced on that token (W3). Due delayed rows and lapsed leases reach
-- 'ready' through job_stage, on its own cadence, not in every claim.
-- Rows come back in claim order (priority, then age).
WITH picked AS MATERIALIZED (
    SELECT candidate.id, gen_random_uuid() AS token,
           row_number() OVER (
               ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
           ) AS position
      FROM (
            SELECT q.queue
              FROM unnest(%(queues)s::text[]) AS q(queue)
             WHERE {{queue_open}}
           ) AS served
     CROSS JOIN {{clock}}
     CROSS JOIN LATERAL (
               SELECT job.id, job.priority, job.run_at
                 FROM ultimate_jobs_job AS job
                WHERE job.state = 'ready'
                  AND job.queue = served.queue
                  AND job.run_at <= clock.now
                  AND job.name = ANY(%(names)s::text[])
                ORDER BY job.priority DESC, job.run_at, job.id
                LIMIT %(limit)s::integer
                  FOR UPDATE SKIP LOCKED
           ) AS candidate
     ORDER BY candidate.priority DESC, candidate.run_at, candidate.id
     LIMIT %(limit)s::integer
),
claimed AS (
    UPDATE ultimate_jobs_job AS job
       {{lease_start}}
      FROM picked
     CROSS JOIN {{clock}}
     WHERE job.id = picked.id
    RETURNING {{job_claimed}}, picked.position
)
SELECT false AS refused, claimed.id, claimed.run_id, claimed.name,
       claimed.queue, claimed.priority, claimed.state, claimed.input, claimed.tenant_id,
       claimed.idempotency_key, claimed.attempt, claimed.max_attempts,
       claimed.lease_owner, claimed.correlation_id, claimed.enqueued_by,
       claimed.created_at, claimed.started_at, NULL::text AS lease_key
  FROM claimed
 ORDER BY claimed.position;

-- name: job_stage :many
-- Move the rows time made claimable to 'ready', apart from the claim, on the worker's
-- poll cadence (job_claim_plain reads 'ready' rows only): due 'delayed'/'suspended'
-- rows of the served queues (S3, retries, sleeps), and 'running' rows whose lease
-- lapsed (W5, the worker died). A lapsed row keeps its counted attempt and loses its
-- token, so the dead holder's late writes are fenced out (W3), and the attempt that died
-- goes to the attempt history (P6); one already at its final
-- attempt is settled dead here (failed for a `dropped` name) with
-- LEASE_LAPSED_FINAL_ATTEMPT, never handed out again, and returned for the worker to
-- announce. SKIP LOCKED: a row another session holds is left to the next pass.
-- Always answers at least one row: `staged` (rows made ready) and `ready` (whether a
-- due ready row of a declared name waits in a served queue, so an idle poll claims
-- only when there is work); the buried rows, if any, ride along with it (id NULL when
-- there are none). The one owner of every time-driven move, for every worker and the
-- testing runner: both claims take 'ready' rows only.
-- An idle worker's poll also carries its registry row (W8, N2, issue 26): `registry`
-- is the worker's id when its idle row is due a refresh (NULL otherwise, and always
-- for the testing runner), and the pass then pushes that row's expiry
-- `registry_lease` seconds ahead and deletes expired rows on the way, as worker_beat
-- does; the row's lists are not touched (the worker carries it only while they are
-- empty and unchanged). `registered` says the row was found and refreshed, `drain`
-- whether an operator asked this worker to drain (both false when not carried).
-- It carries the other roles of the worker's process too (C3, O2, N2, issue 26): the
-- scheduler's leader lease when `leader_holder` holds it (`led`: renewed; with the
-- schedules revision and `db_now`, as leader_acquire answers them), and, when
-- `outbox_lease` is set, `outbox`: whether a row waits that outbox_claim would take
-- (the relay then claims; its NOTIFY stays the fast path, O5).
-- Map (phase: CTEs, rules): pick: due (S3), lapsed (W5) -> move: woken (W3, W5),
--   buried (bury_lapsed, W5) -> record: lapsed_kept (P6), counted (P5),
--   expired, registered (W8), led (C3) -> answer: summary (W2, N1, O2).
WITH due AS MATERIALIZED (
    SELECT job.id
      FROM ultimate_jobs_job AS job
     CROSS JOIN {{clock}}
     WHERE job.state IN ('delayed', 'suspended')
       AND job.queue = ANY(%(queues)s::text[])
       AND job.run_at <= clock.now
     ORDER BY job.run_at
     LIMIT %(limit)s::integer
       FOR UPDATE OF job SKIP LOCKED
),
lapsed AS MATERIALIZED (
    SELECT job.id, job.attempt >= job.max_attempts AS exhausted
      FROM ultimate_jobs_job AS job
     CROSS JOIN {{clock}}
     WHERE job.state = 'running'
       AND job.lease_expires_at < clock.now
       AND job.queue = ANY(%(queues)s::text[])
     ORDER BY job.lease_expires_at
     LIMIT %(limit)s::integer
       FOR UPDATE OF job SKIP LOCKED
),
woken AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'ready',
           lease_owner = NULL,
           lease_expires_at = NULL
      FROM (
            SELECT due.id FROM due
             UNION ALL
            SELECT lapsed.id FROM lapsed WHERE NOT lapsed.exhausted
           ) AS moved
     WHERE job.id = moved.id
    RETURNING job.id
),
buried AS (
    {{bury_lapsed}}
),
lapsed_kept AS (
    -- P6: a lapsed row made ready again keeps the attempt that died (the claim that
    -- takes it next counts a new one). Every part of one statement reads the same
    -- snapshot, so `before` is the row as it was.
    INSERT INTO ultimate_jobs_attempt
           (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome, error)
    SELECT before.id, before.run_id, before.attempt, before.worker_id,
           before.started_at, before.lease_expires_at, 'lapsed', 'LEASE_LAPSED'
      FROM lapsed
      JOIN ultimate_jobs_job AS before ON before.id = lapsed.id
     WHERE NOT lapsed.exhausted
),
counted AS (
    -- P5: a burial counts dead (or failed), with no duration.
    INSERT INTO ultimate_jobs_counter AS counter (name, tier, bucket, failed, dead)
    SELECT buried.name, 60, date_trunc('minute', clock.now),
           count(*) FILTER (WHERE buried.state = 'failed'),
           count(*) FILTER (WHERE buried.state = 'dead')
      FROM buried
     CROSS JOIN {{clock}}
     GROUP BY buried.name, clock.now
     ORDER BY buried.name
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET failed = counter.failed + excluded.failed,
           dead = counter.dead + excluded.dead
    RETURNING counter.name
),
expired AS (
    DELETE FROM ultimate_jobs_worker AS worker
     USING {{clock}}
     WHERE %(registry)s::text IS NOT NULL
       AND worker.expires_at < clock.now
       AND worker.id <> %(registry)s::text
),
registered AS (
    UPDATE ultimate_jobs_worker AS worker
       SET heartbeat_at = clock.now,
           expires_at = clock.now
               + make_interval(secs => %(registry_lease)s::double precision)
      FROM {{clock}}
     WHERE worker.id = %(registry)s::text
    RETURNING worker.drain_requested_at IS NOT NULL AS drain
),
led AS (
    -- C3: the scheduler's leader lease of this process, renewed for `leader_ttl`
    -- seconds as leader_acquire renews it, fenced on the holder and on a lease that
    -- has not lapsed (a lapsed one goes through leader_acquire, which reloads).
    UPDATE ultimate_jobs_leader_lease AS lease
       SET renewed_at = clock.now,
           expires_at = clock.now
               + make_interval(secs => %(leader_ttl)s::double precision)
      FROM {{clock}}
     WHERE lease.role = %(leader_role)s::text
       AND lease.holder = %(leader_holder)s::text
       AND lease.expires_at > clock.now
    RETURNING lease.term
),
summary AS (
    SELECT (SELECT count(*) FROM woken)::integer AS staged,
           EXISTS (SELECT 1 FROM registered) AS registered,
           coalesce((SELECT bool_or(registered.drain) FROM registered), false) AS drain,
           EXISTS (SELECT 1 FROM led) AS led,
           CASE WHEN EXISTS (SELECT 1 FROM led) THEN (
               -- leader_acquire's revision of the runtime schedules
               SELECT md5(coalesce(
                          string_agg(s.key || '@' || s.updated_at::text, ',' ORDER BY s.key),
                          ''
                      ))
                 FROM ultimate_jobs_schedule AS s
           ) END AS schedules_revision,
           clock.now AS db_now,
           %(outbox_lease)s::double precision IS NOT NULL AND EXISTS (
               -- O2: a committed row outbox_claim would take (the partial index on
               -- unpublished rows)
               SELECT 1
                 FROM ultimate_jobs_outbox AS outbox
                WHERE outbox.published_at IS NULL
                  AND (outbox.claimed_at IS NULL
                       OR outbox.claimed_at <= clock.now - make_interval(
                              secs => %(outbox_lease)s::double precision
                          ))
           ) AS outbox,
           EXISTS (
               -- The claim's own walk of the ready index, one row deep per queue.
               SELECT 1
                 FROM unnest(%(queues)s::text[]) AS served(queue)
                CROSS JOIN {{clock}}
                CROSS JOIN LATERAL (
                          SELECT job.id
                            FROM ultimate_jobs_job AS job
                           WHERE job.state = 'ready'
                             AND job.queue = served.queue
                             AND job.run_at <= clock.now
                             AND job.name = ANY(%(names)s::text[])
                           ORDER BY job.priority DESC, job.run_at, job.id
                           LIMIT 1
                      ) AS waiting
           ) AS ready
      FROM {{clock}}
)
SELECT summary.staged, summary.ready, summary.registered, summary.drain,
       summary.led, summary.schedules_revision, summary.db_now, summary.outbox,
       buried.id, buried.run_id, buried.name, buried.queue, buried.priority,
       buried.state, buried.input, buried.tenant_id, buried.idempotency_key,
       buried.attempt, buried.max_attempts, buried.lease_owner, buried.correlation_id,
       buried.enqueued_by, buried.created_at, buried.started_at
  FROM summary
  LEFT JOIN buried ON true;

-- name: job_heartbeat :many
-- Renew the lease of every job this worker holds, in one statement (W4).
-- Fenced per row on (id, state = 'running', lease_owner) (W3): a row another worker
-- reclaimed, or an operator cancelled, is not renewed. The answer has one row per
-- input id: renewed, and the state the row is in now (NULL when it was removed).
-- The concurrency slots of every renewed run (L1, L2) are renewed to the same expiry
-- in this same statement, so a run's slots lapse exactly when its lease does; `slots`
-- says how many were renewed (0 for a capped run: its slot was taken over).
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
    RETURNING job.id, job.lease_owner, job.lease_expires_at
),
slots AS (
    UPDATE ultimate_jobs_lease AS lease
       SET expires_at = renewed.lease_expires_at
      FROM renewed
     WHERE lease.holder = renewed.lease_owner
    RETURNING lease.holder
)
SELECT held.id,
       renewed.id IS NOT NULL AS renewed,
       job.state,
       (SELECT count(*) FROM slots WHERE slots.holder = held.lease_owner) AS slots
  FROM held
  LEFT JOIN renewed ON renewed.id = held.id
  LEFT JOIN ultimate_jobs_job AS job ON job.id = held.id;

-- name: job_complete :many
-- Settle completed jobs as 'done', many in one statement (N3), each fenced on its own
-- claim (W3): a row whose lease another worker took, or that was cancelled, is left
-- alone and absent from the answer. Leaving the live states releases the key (J2).
-- The per-job counters move in this same statement (P5), by job name in name order
-- (so two writers lock counter rows in one order), counting only rows that settled;
-- a duration is measured on the database's clock, from the claim to the settle.
-- `away_parent_id` names a settled child's parent when it is not on this alias (S11,
-- Q1): the worker wakes it there once this commits (runtime/parents.py).
WITH settled AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'done',
           finished_at = coalesce(%(now)s::timestamptz, now()),
           lease_owner = NULL,
           lease_expires_at = NULL,
           progress = coalesce(given.progress, job.progress)
      FROM unnest(
               %(ids)s::uuid[],
               %(lease_owners)s::uuid[],
               %(progresses)s::jsonb[]
           ) AS given(id, lease_owner, progress)
     WHERE job.id = given.id
       AND job.state = 'running'
       AND job.lease_owner = given.lease_owner
    RETURNING job.id, job.name,
              extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - job.started_at)
                  AS duration,
              {{away_parent}}
),
counted AS (
    INSERT INTO ultimate_jobs_counter AS counter (name, tier, bucket, done, duration)
    SELECT settled.name, 60, date_trunc('minute', coalesce(%(now)s::timestamptz, now())),
           count(*), coalesce(sum(settled.duration), 0)
      FROM settled
     GROUP BY settled.name
     ORDER BY settled.name
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET done = counter.done + excluded.done,
           duration = counter.duration + excluded.duration
    RETURNING counter.name
)
-- (A data-modifying CTE always runs to completion, read or not.)
SELECT settled.id, settled.away_parent_id FROM settled;

-- name: job_retry :many
-- A failed attempt with attempts left: back to the queue after `delay` seconds (R1, R2),
-- 'delayed' while it backs off ('ready' when the delay is zero). The attempt stays
-- counted. Fenced on the claim (W3); the job's `retried` counter moves with it (P5)
-- and the attempt that ended is kept in the attempt history (P6).
WITH settled AS (
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
    RETURNING job.id, job.name, job.run_at, job.run_id, job.attempt, job.worker_id,
              job.started_at,
              extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - job.started_at)
                  AS duration
),
kept AS (
    -- P6: the row moves on to its next attempt, so the one that ended is kept here.
    INSERT INTO ultimate_jobs_attempt
           (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome,
            error, error_code)
    SELECT settled.id, settled.run_id, settled.attempt, settled.worker_id,
           settled.started_at, coalesce(%(now)s::timestamptz, now()), 'retried',
           %(last_error)s::text, %(error_code)s::text
      FROM settled
),
counted AS (
    INSERT INTO ultimate_jobs_counter AS counter (name, tier, bucket, retried, duration)
    SELECT settled.name, 60, date_trunc('minute', coalesce(%(now)s::timestamptz, now())),
           1, coalesce(settled.duration, 0)
      FROM settled
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET retried = counter.retried + 1,
           duration = counter.duration + excluded.duration
    RETURNING counter.name
)
SELECT settled.id, settled.run_at FROM settled;

-- name: job_bury :many
-- A failed attempt that ends the job: 'dead' (dead-lettered, requeueable, R4) or
-- 'failed' (dead_letter=False, or refused). Keeps the input, the attempts, the last
-- error with its traceback and why it stopped. Fenced on the claim (W3); the job's
-- `dead` or `failed` counter moves with it (P5). `away_parent_id` as in job_complete.
WITH settled AS (
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
    RETURNING job.id, job.name, job.state,
              extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - job.started_at)
                  AS duration,
              {{away_parent}}
),
counted AS (
    INSERT INTO ultimate_jobs_counter AS counter (name, tier, bucket, failed, dead, duration)
    SELECT settled.name, 60, date_trunc('minute', coalesce(%(now)s::timestamptz, now())),
           (settled.state = 'failed')::integer, (settled.state = 'dead')::integer,
           coalesce(settled.duration, 0)
      FROM settled
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET failed = counter.failed + excluded.failed,
           dead = counter.dead + excluded.dead,
           duration = counter.duration + excluded.duration
    RETURNING counter.name
)
SELECT settled.id, settled.away_parent_id FROM settled;

-- name: job_release :many
-- Hand a claimed job back to the queue, claimable at once, lease released (W6).
-- uncount = true for an interrupted attempt (the body stopped because of the drain):
-- the attempt is not counted. uncount = false for an abandoned one (the body ignored
-- its token until the drain deadline): the attempt stays counted, and is kept in the
-- attempt history as 'abandoned' (P6). Fenced (W3).
WITH released AS (
    UPDATE ultimate_jobs_job AS job
       SET state = 'ready',
           run_at = coalesce(%(now)s::timestamptz, now()),
           lease_owner = NULL,
           lease_expires_at = NULL,
           attempt = job.attempt - CASE WHEN %(uncount)s::boolean THEN 1 ELSE 0 END
     WHERE job.id = %(id)s::uuid
       AND job.state = 'running'
       AND job.lease_owner = %(lease_owner)s::uuid
    RETURNING job.id, job.run_id, job.attempt, job.worker_id, job.started_at
),
kept AS (
    INSERT INTO ultimate_jobs_attempt
           (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome, error)
    SELECT released.id, released.run_id, released.attempt, released.worker_id,
           released.started_at, coalesce(%(now)s::timestamptz, now()), 'abandoned',
           'ABANDONED_AT_DRAIN_DEADLINE'
      FROM released
     WHERE NOT %(uncount)s::boolean
)
SELECT released.id FROM released;

-- name: job_hand_back :many
-- Hand a claimed job back untouched (P11): its stored input is of a newer version
-- than this worker's code declares (a worker of the previous deploy met a row of the
-- next one). Lease released, the attempt not counted, no error kept, due again after
-- `delay` seconds as 'delayed', so this worker does not claim it again at once while
-- a worker of the newer code can. Fenced (W3).
UPDATE ultimate_jobs_job AS job
   SET state = 'delayed',
       run_at = coalesce(%(now)s::timestamptz, now())
                + make_interval(secs => %(delay)s::double precision),
       lease_owner = NULL,
       lease_expires_at = NULL,
       attempt = job.attempt - 1
 WHERE job.id = %(id)s::uuid
   AND job.state = 'running'
   AND job.lease_owner = %(lease_owner)s::uuid
RETURNING job.id;

-- name: job_requeue :many
-- Requeue ONE finished job (done, failed, dead, cancelled) as a fresh run: attempt 0,
-- due now, error cleared, a new run_id, its queue woken (N1). Refused (no row) when the
-- job is live, or when a live job of the same name and tenant now holds its key.
-- The last attempt of the run that ended is kept in the attempt history (P6): the
-- row is about to forget it. Every part of one statement reads the same snapshot, so
-- `before` is the row as it was.
WITH requeued AS (
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
       AND {{key_free}}
    RETURNING job.id, job.queue, pg_notify('ultimate_jobs_wake', job.queue) IS NULL AS announced
),
kept AS (
    INSERT INTO ultimate_jobs_attempt
           (job_id, run_id, attempt, worker_id, started_at, finished_at, outcome,
            error, error_code)
    SELECT before.id, before.run_id, before.attempt, before.worker_id,
           before.started_at, before.finished_at,
           CASE
               WHEN before.state = 'done' THEN 'completed'
               WHEN before.state = 'dead' THEN 'dead-lettered'
               WHEN before.state = 'cancelled' THEN 'cancelled'
               WHEN before.stop_reason = 'refused' THEN 'refused'
               ELSE 'dropped'
           END,
           before.last_error, before.error_code
      FROM requeued
      JOIN ultimate_jobs_job AS before ON before.id = requeued.id
     WHERE before.attempt > 0
)
SELECT requeued.id, requeued.queue, requeued.announced FROM requeued;

-- name: job_cancel :many
-- Cancel ONE live job. A queued row is cancelled at once; a running one is cancelled
-- too, and its worker finds out at its next heartbeat (the fenced renewal no longer
-- matches), cancels the run's token, and its late settle matches nothing. `was` is
-- the state it was cancelled from (the job_cancelled signal tells it, P4);
-- `parent_id` lets the caller wake a parent on another alias (S11, Q1).
UPDATE ultimate_jobs_job AS job
   SET state = 'cancelled',
       finished_at = coalesce(%(now)s::timestamptz, now()),
       lease_owner = NULL,
       lease_expires_at = NULL,
       stop_reason = 'cancelled',
       last_error = %(reason)s::text
  FROM (
        SELECT live.id, live.state
          FROM ultimate_jobs_job AS live
         WHERE live.id = %(id)s::uuid
           FOR UPDATE
       ) AS before
 WHERE job.id = before.id
   AND job.state IN ('ready', 'delayed', 'running', 'suspended')
RETURNING job.id, job.name, before.state AS was, job.parent_id;

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
-- Delete ONE job that is not running; its steps go with it (ON DELETE CASCADE) and so
-- do any concurrency slot rows still naming it.
WITH removed AS (
    DELETE FROM ultimate_jobs_job AS job
     WHERE job.id = %(id)s::uuid
       AND job.state <> 'running'
    RETURNING job.id
),
slots AS (
    DELETE FROM ultimate_jobs_lease AS lease
     USING removed
     WHERE lease.job_id = removed.id
)
SELECT removed.id FROM removed;

-- fragment: bulk_match
-- The filters of a bulk operator verb (P2) on the row `job`: its state, and the queue,
-- name, tenant and failure fingerprint (P10, served by the fingerprint index) when given.
job.state = %(state)s::text
AND (%(queue)s::text IS NULL OR job.queue = %(queue)s::text)
AND (%(name)s::text IS NULL OR job.name = %(name)s::text)
AND (%(tenant_id)s::text IS NULL OR job.tenant_id = %(tenant_id)s::text)
AND (%(fingerprint)s::text IS NULL OR job.fingerprint = %(fingerprint)s::text)

-- name: job_bulk_candidates :many
-- The ids one bulk operator verb may move, oldest first, at most `limit` (P2: 1,000 per
-- call), from the hot table and from the archive (Q2: a finished job moved there is
-- retried or removed like one still in the hot table). For a requeue, a finished row
-- whose key a live job holds is left out (it could not move), and of several finished
-- rows sharing one key only the oldest is taken, so "call until remaining is zero"
-- ends. `remaining` counts what a later call could still move after these.
WITH matching AS (
    SELECT job.id, job.name, job.tenant_id, job.idempotency_key
      FROM ultimate_jobs_job AS job
     WHERE {{bulk_match}}
       AND (NOT %(requeue)s::boolean OR {{key_free}})
     UNION ALL
    SELECT job.id, job.name, job.tenant_id, job.idempotency_key
      FROM ultimate_jobs_job_archive AS job
     WHERE {{bulk_match}}
       AND (NOT %(requeue)s::boolean OR {{key_free}})
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
