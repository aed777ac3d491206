-- Statements on ultimate_jobs_counter: per-job counts by time bucket (P5). The settle
-- statements in jobs.sql add to the 1-minute buckets; these fold and read them.

-- name: counter_rollup :many
-- Fold each tier into the next once it ages out: 1-minute buckets older than 24 hours
-- into 5-minute buckets, 5-minute buckets older than 7 days into 1-hour buckets, and
-- delete 1-hour buckets older than 30 days (at most 4,176 rows per job name). Moved
-- rows are deleted and added to the next tier in one statement, so a count is never
-- lost or doubled; running it twice is harmless. The scheduler leader runs it.
WITH minutes AS (
    DELETE FROM ultimate_jobs_counter AS counter
     WHERE counter.tier = 60
       AND counter.bucket < coalesce(%(now)s::timestamptz, now()) - interval '24 hours'
    RETURNING counter.name, counter.bucket, counter.done, counter.retried,
              counter.failed, counter.dead, counter.duration
),
into_five AS (
    INSERT INTO ultimate_jobs_counter AS counter
           (name, tier, bucket, done, retried, failed, dead, duration)
    SELECT minutes.name, 300,
           date_bin('5 minutes', minutes.bucket, timestamptz '2000-01-01 00:00+00'),
           sum(minutes.done), sum(minutes.retried), sum(minutes.failed),
           sum(minutes.dead), sum(minutes.duration)
      FROM minutes
     GROUP BY 1, 3
     ORDER BY 1, 3
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET done = counter.done + excluded.done,
           retried = counter.retried + excluded.retried,
           failed = counter.failed + excluded.failed,
           dead = counter.dead + excluded.dead,
           duration = counter.duration + excluded.duration
    RETURNING counter.name
),
fives AS (
    DELETE FROM ultimate_jobs_counter AS counter
     WHERE counter.tier = 300
       AND counter.bucket < coalesce(%(now)s::timestamptz, now()) - interval '7 days'
    RETURNING counter.name, counter.bucket, counter.done, counter.retried,
              counter.failed, counter.dead, counter.duration
),
into_hours AS (
    INSERT INTO ultimate_jobs_counter AS counter
           (name, tier, bucket, done, retried, failed, dead, duration)
    SELECT fives.name, 3600, date_trunc('hour', fives.bucket),
           sum(fives.done), sum(fives.retried), sum(fives.failed),
           sum(fives.dead), sum(fives.duration)
      FROM fives
     GROUP BY 1, 3
     ORDER BY 1, 3
        ON CONFLICT (name, tier, bucket) DO UPDATE
       SET done = counter.done + excluded.done,
           retried = counter.retried + excluded.retried,
           failed = counter.failed + excluded.failed,
           dead = counter.dead + excluded.dead,
           duration = counter.duration + excluded.duration
    RETURNING counter.name
),
expired AS (
    DELETE FROM ultimate_jobs_counter AS counter
     WHERE counter.tier = 3600
       AND counter.bucket < coalesce(%(now)s::timestamptz, now()) - interval '30 days'
    RETURNING counter.name
)
SELECT (SELECT count(*) FROM minutes) AS minutes_folded,
       (SELECT count(*) FROM fives) AS fives_folded,
       (SELECT count(*) FROM expired) AS hours_expired;

-- name: counter_totals :many
-- Per job name, the counts of every bucket that starts at or after `since`, whatever
-- its tier (P5): done, retried, failed, dead, and the summed duration in seconds.
SELECT counter.name,
       sum(counter.done)::bigint AS done,
       sum(counter.retried)::bigint AS retried,
       sum(counter.failed)::bigint AS failed,
       sum(counter.dead)::bigint AS dead,
       sum(counter.duration)::double precision AS duration
  FROM ultimate_jobs_counter AS counter
 WHERE counter.bucket >= %(since)s::timestamptz
   AND (%(name)s::text IS NULL OR counter.name = %(name)s::text)
 GROUP BY counter.name
 ORDER BY counter.name;
