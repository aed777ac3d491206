"""The partitioned table of finished jobs is the archive (issue 25 item 4, SPEC Q2).

"History" now means the attempt history only (P6). This renames, with plain
``ALTER ... RENAME`` (no row is copied, no lock beyond the catalog's), what 0006 made:

* the table ``ultimate_jobs_job_history`` → ``ultimate_jobs_job_archive``, its primary
  key and its four indexes;
* every day partition made since (``..._history_pYYYYMMDD`` → ``..._archive_pYYYYMMDD``)
  and each partition's own indexes and key;
* the two functions, ``ultimate_jobs_archive_ensure`` and
  ``ultimate_jobs_archive_drop_before``, re-created over the renamed table (a function
  body names its table by text).

The model is unmanaged, so Django's state follows with ``RenameModel`` and
``AlterModelTable`` and touches nothing. Reversible: the same steps the other way.
"""

from django.db import migrations

OLD = "ultimate_jobs_job_history"
NEW = "ultimate_jobs_job_archive"


# The two day functions of 0006 over @table@: @prefix@_ensure, @prefix@_drop_before.
FUNCTIONS = """
CREATE FUNCTION @prefix@_ensure(first_day date, last_day date)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date := first_day;
    made integer := 0;
    part text;
BEGIN
    WHILE day <= last_day LOOP
        part := '@table@_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(part) IS NULL THEN
            BEGIN
                EXECUTE format(
                    'CREATE TABLE %I PARTITION OF @table@ '
                    'FOR VALUES FROM (%L) TO (%L)',
                    part,
                    day::timestamp AT TIME ZONE 'UTC',
                    (day + 1)::timestamp AT TIME ZONE 'UTC'
                );
                made := made + 1;
            EXCEPTION WHEN duplicate_table OR unique_violation THEN
                NULL;  -- a concurrent caller made it first
            END;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN made;
END
$$;

CREATE FUNCTION @prefix@_drop_before(horizon date)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    part text;
    counted bigint;
    dropped bigint := 0;
BEGIN
    FOR part IN
        SELECT child.relname
          FROM pg_inherits AS link
          JOIN pg_class AS child ON child.oid = link.inhrelid
         WHERE link.inhparent = '@table@'::regclass
           AND child.relname ~ '^@table@_p[0-9]{8}$'
           AND to_date(right(child.relname, 8), 'YYYYMMDD') < horizon
         ORDER BY child.relname
    LOOP
        EXECUTE format('SELECT count(*) FROM %I', part) INTO counted;
        EXECUTE format('DROP TABLE IF EXISTS %I', part);
        dropped := dropped + counted;
    END LOOP;
    RETURN dropped;
END
$$;
"""


# Rename @old@ (its key and indexes, its partitions and theirs) to @new@; drop the
# day functions @old_prefix@_* (rename() re-creates them over @new@).
RENAME = """
DROP FUNCTION @old_prefix@_drop_before(date);
DROP FUNCTION @old_prefix@_ensure(date, date);
ALTER TABLE @old@ RENAME TO @new@;
ALTER INDEX @old@_pkey RENAME TO @new@_pkey;
ALTER INDEX @old@_name_age RENAME TO @new@_name_age;
ALTER INDEX @old@_state_age RENAME TO @new@_state_age;
ALTER INDEX @old@_tenant RENAME TO @new@_tenant;
ALTER INDEX @old@_key RENAME TO @new@_key;
DO $$
DECLARE
    part record;
    idx record;
BEGIN
    FOR part IN
        SELECT child.oid, child.relname
          FROM pg_inherits AS link
          JOIN pg_class AS child ON child.oid = link.inhrelid
         WHERE link.inhparent = '@new@'::regclass
    LOOP
        FOR idx IN
            SELECT named.relname
              FROM pg_index AS ix
              JOIN pg_class AS named ON named.oid = ix.indexrelid
             WHERE ix.indrelid = part.oid
               AND starts_with(named.relname, '@old@')
        LOOP
            EXECUTE format(
                'ALTER INDEX %I RENAME TO %I',
                idx.relname,
                '@new@' || substr(idx.relname, length('@old@') + 1)
            );
        END LOOP;
        IF starts_with(part.relname, '@old@') THEN
            EXECUTE format(
                'ALTER TABLE %I RENAME TO %I',
                part.relname,
                '@new@' || substr(part.relname, length('@old@') + 1)
            );
        END IF;
    END LOOP;
END
$$;
"""


def rename(old: str, new: str, old_prefix: str, new_prefix: str) -> str:
    """The statements that rename table ``old`` to ``new`` and re-create the day
    functions under ``new_prefix``."""
    renamed = (
        RENAME.replace("@old_prefix@", old_prefix)
        .replace("@old@", old)
        .replace("@new@", new)
    )
    return renamed + FUNCTIONS.replace("@table@", new).replace("@prefix@", new_prefix)


class Migration(migrations.Migration):
    dependencies = [
        ("ultimate_jobs", "0006_history"),
    ]

    operations = [
        migrations.RunSQL(
            sql=rename(OLD, NEW, "ultimate_jobs_history", "ultimate_jobs_archive"),
            reverse_sql=rename(
                NEW, OLD, "ultimate_jobs_archive", "ultimate_jobs_history"
            ),
        ),
        migrations.RenameModel(old_name="JobHistory", new_name="JobArchive"),
        migrations.AlterModelTable(name="jobarchive", table=NEW),
        migrations.AlterModelOptions(
            name="jobarchive",
            options={
                "verbose_name_plural": "job archive",
                "ordering": ("-id",),
                "abstract": False,
                "managed": False,
            },
        ),
    ]
