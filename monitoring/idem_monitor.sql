-- What the exporter's role, idem_monitor, may read: run this as a superuser
-- (or idem's owner) in every database that has CREATE EXTENSION idem, once
-- the role exists (monitoring/README.md):
--
--     CREATE ROLE idem_monitor LOGIN;
--     GRANT pg_monitor TO idem_monitor;
--
-- pg_monitor lets it see the purge launcher in pg_stat_activity.  It reads
-- no key, fingerprint, response or checkpoint: only the columns below.

-- the counters: the view and the function behind it
GRANT SELECT ON idem_stats TO idem_monitor;
GRANT EXECUTE ON FUNCTION idem.stats_1_3() TO idem_monitor;
-- from 1.6: counts and times of what the purge has left to do
GRANT EXECUTE ON FUNCTION idem.purge_backlog() TO idem_monitor;

-- attempts in flight and expired rows, from the columns that say nothing
-- about payments
GRANT USAGE ON SCHEMA idem TO idem_monitor;
GRANT SELECT (state, lease_until, created_at, expires_at) ON idem.keys TO idem_monitor;
GRANT SELECT (expires_at) ON idem.webhooks TO idem_monitor;
