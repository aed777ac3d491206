-- Statements of the database webhook ledger (F5) on ultimate_jobs_webhook_delivery and
-- ultimate_jobs_webhook_endpoint, in the order a delivery uses them: ask whether the
-- endpoint is disabled, record the attempt, disable after too many failures; and the
-- person's verb, enable.
--
-- Every parameter carries a cast, so each statement can be EXPLAINed with NULLs.
-- Time comes from the database unless a test passes %(now)s (the testing clock).

-- name: webhook_is_disabled :one
-- Whether the endpoint is disabled, asked before every request: one row, TRUE only when
-- a disable set disabled_at and no person has enabled the endpoint since. An endpoint
-- the ledger has never seen answers FALSE.
SELECT EXISTS (
    SELECT 1
      FROM ultimate_jobs_webhook_endpoint
     WHERE endpoint_id = %(endpoint_id)s::text
       AND disabled_at IS NOT NULL
) AS disabled;

-- name: webhook_record :one
-- Record one delivery attempt and move the endpoint's failure streak in ONE statement:
-- a success resets it to 0, a failure adds 1 (two deliveries failing at once each
-- count, under the row lock of the upsert). Answers the streak after this attempt.
-- A success never clears disabled_at: only webhook_enable (a person) does.
WITH attempt AS (
    INSERT INTO ultimate_jobs_webhook_delivery (
        endpoint_id, event_id, topic, job_id, attempt, tenant_id, ok, status, error,
        retry_after, duration, attempted_at
    )
    VALUES (
        %(endpoint_id)s::text,
        %(event_id)s::text,
        %(topic)s::text,
        %(job_id)s::uuid,
        %(attempt)s::integer,
        %(tenant_id)s::text,
        %(ok)s::boolean,
        %(status)s::integer,
        left(coalesce(%(error)s::text, ''), 500),
        %(retry_after)s::double precision,
        %(duration)s::double precision,
        coalesce(%(now)s::timestamptz, now())
    )
    RETURNING id
)
INSERT INTO ultimate_jobs_webhook_endpoint AS endpoint (
    endpoint_id, consecutive_failures, last_attempt_at
)
SELECT %(endpoint_id)s::text,
       CASE WHEN %(ok)s::boolean THEN 0 ELSE 1 END,
       coalesce(%(now)s::timestamptz, now())
  FROM attempt
    ON CONFLICT (endpoint_id) DO UPDATE
   SET consecutive_failures = CASE
           WHEN %(ok)s::boolean THEN 0
           ELSE endpoint.consecutive_failures + 1
       END,
       last_attempt_at = excluded.last_attempt_at
RETURNING endpoint.consecutive_failures;

-- name: webhook_disable :one
-- Disable the endpoint (disable_after consecutive failures): sets disabled_at once and
-- keeps the first reason; answers the row, disabled already or not.
INSERT INTO ultimate_jobs_webhook_endpoint AS endpoint (
    endpoint_id, consecutive_failures, disabled_at, disabled_reason
)
VALUES (
    %(endpoint_id)s::text,
    0,
    coalesce(%(now)s::timestamptz, now()),
    left(%(reason)s::text, 500)
)
    ON CONFLICT (endpoint_id) DO UPDATE
   SET disabled_at = coalesce(endpoint.disabled_at, excluded.disabled_at),
       disabled_reason = CASE
           WHEN endpoint.disabled_at IS NULL THEN excluded.disabled_reason
           ELSE endpoint.disabled_reason
       END
RETURNING endpoint.endpoint_id, endpoint.disabled_at, endpoint.disabled_reason;

-- name: webhook_enable :one
-- A person re-enables the endpoint: clears disabled_at and the failure streak and
-- records who and when. Answers the row (an endpoint never seen gets one).
INSERT INTO ultimate_jobs_webhook_endpoint AS endpoint (
    endpoint_id, consecutive_failures, enabled_at, enabled_by
)
VALUES (
    %(endpoint_id)s::text,
    0,
    coalesce(%(now)s::timestamptz, now()),
    left(%(enabled_by)s::text, 255)
)
    ON CONFLICT (endpoint_id) DO UPDATE
   SET disabled_at = NULL,
       disabled_reason = '',
       consecutive_failures = 0,
       enabled_at = excluded.enabled_at,
       enabled_by = excluded.enabled_by
RETURNING endpoint.endpoint_id, endpoint.enabled_at, endpoint.enabled_by;
