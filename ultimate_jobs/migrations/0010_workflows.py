"""Fan-out and fan-in (issue 28, SPEC S10, S11).

``parent_id`` on the job row names the job whose ``run.spawn`` enqueued it; the finished
jobs table gets the same column, so a child keeps it when it is moved there (Q2). Two
partial indexes serve a parent's children: all of them by id (the console's keyset
list, counts by state) and the live ones (the fan-in's wake).

The wake is a deferred constraint trigger: when a child's settle commits (done, failed,
dead, cancelled, whichever statement wrote it), it checks whether its parent still has
a live child and, if none, flags the parent's waiting ``wait_for_jobs`` step ``woken``
and makes a suspended parent due now with a ``pg_notify`` to its queue's workers (the
event bus's wake, S4). A child that can share-lock a waiting sibling (ready, delayed,
suspended) is not the last (that sibling settles after it commits) and stops there,
without the parent's lock. Otherwise the check
runs under the parent's transaction-level advisory lock, taken at commit (after the
transaction's row locks), and reads with a fresh snapshot (a VOLATILE function): of two
last children settling at once the second sees the first committed, and a parent
checking its children under the same lock (sql/workflows.sql ``fanin_lock``) either
sees the child settled or is flagged by it.
Settles of children of one parent serialize only their commits' last step; one
statement that settles children of two parents while another settles children of the
same two in the other order can deadlock: PostgreSQL aborts one, and the settle paths
retry it (runtime/acks.py, runtime/settle.py).
"""

from django.db import migrations, models

WORKFLOWS_SQL = """
ALTER TABLE ultimate_jobs_job_archive ADD COLUMN parent_id uuid;

CREATE FUNCTION ultimate_jobs_child_settled() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    due_queue text;
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
    -- is none): decide under the parent's lock, with a fresh snapshot.
    PERFORM pg_advisory_xact_lock(
        hashtext('ultimate_jobs.fan_in'), hashtext(NEW.parent_id::text)
    );
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

CREATE CONSTRAINT TRIGGER ultimate_jobs_child_settled
    AFTER UPDATE OF state ON ultimate_jobs_job
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.parent_id IS NOT NULL
          AND NEW.state IN ('done', 'failed', 'dead', 'cancelled')
          AND OLD.state NOT IN ('done', 'failed', 'dead', 'cancelled'))
    EXECUTE FUNCTION ultimate_jobs_child_settled();
"""

WORKFLOWS_REVERSE = """
DROP TRIGGER IF EXISTS ultimate_jobs_child_settled ON ultimate_jobs_job;
DROP FUNCTION IF EXISTS ultimate_jobs_child_settled();
ALTER TABLE ultimate_jobs_job_archive DROP COLUMN IF EXISTS parent_id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0009_agent_token"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="parent_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="jobstep",
            name="kind",
            field=models.CharField(
                choices=[
                    ("step", "Step"),
                    ("atomic", "Atomic"),
                    ("sleep", "Sleep"),
                    ("event", "Event"),
                    ("spawn", "Spawn"),
                    ("jobs", "Jobs"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("parent_id__isnull", False)),
                fields=["parent_id", "id"],
                name="ultimate_jobs_job_children",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(
                    ("parent_id__isnull", False),
                    ("state__in", ("ready", "delayed", "running", "suspended")),
                ),
                fields=["parent_id", "id"],
                name="ultimate_jobs_job_live_kids",
            ),
        ),
        migrations.RunSQL(sql=WORKFLOWS_SQL, reverse_sql=WORKFLOWS_REVERSE),
    ]
