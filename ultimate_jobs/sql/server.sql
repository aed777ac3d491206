-- Statements that read the server's limits (issue 31): the connection budget and the
-- commit durability of an alias, for the start-up warnings and the system checks.

-- name: server_room :one
-- Reads only. The session's synchronous_commit (the server's, the database's and the
-- role's defaults as this alias's sessions get them), max_connections, the slots
-- reserved for superusers, every client session now open on the server and those of
-- this package (application_name 'ultimate_jobs <purpose> ...'), counted by purpose.
SELECT current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('max_connections')::integer AS max_connections,
       current_setting('superuser_reserved_connections')::integer AS superuser_reserved,
       (SELECT count(*)
          FROM pg_stat_activity
         WHERE backend_type = 'client backend')::integer AS sessions,
       (SELECT coalesce(jsonb_object_agg(purpose, n), '{}'::jsonb)
          FROM (SELECT split_part(application_name, ' ', 2) AS purpose,
                       count(*) AS n
                  FROM pg_stat_activity
                 WHERE backend_type = 'client backend'
                   AND starts_with(application_name, 'ultimate_jobs ')
                 GROUP BY 1) AS ours) AS ours;
