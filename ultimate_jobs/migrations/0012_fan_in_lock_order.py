"""Fan-in wake without deadlocks across parents (issue 28, SPEC S11).

The trigger of 0010_workflows takes the parent's fan-in lock (a transaction-level
advisory lock) at the commit of each settled child, in the order the transaction
settled them. One transaction that settles children of parents P and Q while another
settles children of Q and P could each hold one lock and wait for the other:
PostgreSQL aborted one of them (a worker's ack batch retried; an operator's statement
failed). Now a transaction takes the locks it waits for in increasing key order only:
the highest key it took so far is kept in the transaction-local setting
``ultimate_jobs.fan_in_key``; a lock below it is only tried (``pg_try_...``). When
another transaction holds that one, this settle does not wait and does not decide:
it makes the suspended parent due now instead (a nudge, skipping a parent row someone
is writing), and the parent, woken, checks its children itself under the lock
(sql/workflows.sql ``fanin_lock``); a nudge it cannot give is left to the parent's
``event_poll`` re-check, the guarantee behind every wake. Waits in one direction
only: no cycle, no deadlock between settles.

Reverse: none needed; the function keeps 0010's contract and 0010's reverse drops it.
"""

from django.db import migrations

FAN_IN_ORDER_SQL = """
CREATE OR REPLACE FUNCTION ultimate_jobs_child_settled() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    due_queue text;
    lock_key integer := hashtext(NEW.parent_id::text);
    last_key integer := nullif(
        current_setting('ultimate_jobs.fan_in_key', true), ''
    )::integer;
BEGIN
    -- A waiting sibling (ready, delayed, suspended) this transaction can share-lock
    -- cannot settle before it commits: a claim skips the locked row, anything else
    -- that would settle it waits for the lock. So this child is not the last, and that
    -- sibling's own check, later, sees this settle committed: the usual case, without
    -- the parent's lock. A running sibling is never locked (its settle would queue
    -- behind this commit, and the next behind that one). The next waiting sibling by
    -- id first: concurrent children lock different rows.
    PERFORM 1
       FROM ultimate_jobs_job AS sibling
      WHERE sibling.parent_id = NEW.parent_id
        AND sibling.state IN ('ready', 'delayed', 'suspended')
        AND sibling.id > NEW.id
      ORDER BY sibling.id
      LIMIT 1
        FOR SHARE SKIP LOCKED;
    IF NOT FOUND THEN
        PERFORM 1
           FROM ultimate_jobs_job AS sibling
          WHERE sibling.parent_id = NEW.parent_id
            AND sibling.state IN ('ready', 'delayed', 'suspended')
            AND sibling.id < NEW.id
          ORDER BY sibling.id DESC
          LIMIT 1
            FOR SHARE SKIP LOCKED;
    END IF;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    -- Every live sibling is being written by another transaction right now (or there
    -- is none): decide under the parent's lock, with a fresh snapshot. Wait for it
    -- only in increasing key order (no cycle between two settling transactions).
    IF last_key IS NULL OR lock_key > last_key THEN
        PERFORM pg_advisory_xact_lock(hashtext('ultimate_jobs.fan_in'), lock_key);
        PERFORM set_config('ultimate_jobs.fan_in_key', lock_key::text, true);
    ELSIF lock_key < last_key
          AND NOT pg_try_advisory_xact_lock(hashtext('ultimate_jobs.fan_in'), lock_key)
    THEN
        -- Out of order and held elsewhere: nudge the parent, which re-checks its
        -- children under the lock once woken (a spurious wake at worst).
        UPDATE ultimate_jobs_job AS parent
           SET run_at = now()
         WHERE parent.id = (
                   SELECT nudged.id
                     FROM ultimate_jobs_job AS nudged
                    WHERE nudged.id = NEW.parent_id
                      AND nudged.state = 'suspended'
                      AND nudged.run_at > now()
                      FOR NO KEY UPDATE SKIP LOCKED
               )
        RETURNING parent.queue INTO due_queue;
        IF due_queue IS NOT NULL THEN
            PERFORM pg_notify('ultimate_jobs_wake', due_queue);
        END IF;
        RETURN NULL;
    END IF;
    IF EXISTS (
        SELECT 1
          FROM ultimate_jobs_job AS sibling
         WHERE sibling.parent_id = NEW.parent_id
           AND sibling.state IN ('ready', 'delayed', 'running', 'suspended')
    ) THEN
        RETURN NULL;
    END IF;
    UPDATE ultimate_jobs_step AS step
       SET woken = true
     WHERE step.job_id = NEW.parent_id
       AND step.kind = 'jobs'
       AND step.status = 'waiting'
       AND NOT step.archived;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE ultimate_jobs_job AS parent
       SET run_at = now()
     WHERE parent.id = NEW.parent_id
       AND parent.state = 'suspended'
    RETURNING parent.queue INTO due_queue;
    IF due_queue IS NOT NULL THEN
        PERFORM pg_notify('ultimate_jobs_wake', due_queue);
    END IF;
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0011_archive_children"),
    ]

    operations = [
        migrations.RunSQL(sql=FAN_IN_ORDER_SQL, reverse_sql=migrations.RunSQL.noop),
    ]
