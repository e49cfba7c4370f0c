/* idem--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.1'" to load this file. \quit

-- Attempts in flight, for operators: which keys a two-phase worker holds,
-- until when, and how far it got.  A row whose lease has expired belongs to
-- a worker that died or stalls: the next claim of the key takes it over as
-- a new attempt, and checkpoint/checkpoint_data tell what it had done.
-- Claims not yet committed are not shown (nobody else can see them either).
-- Like idem_stats, it is owned by the extension's owner and reads the
-- tables with that role's rights, so an operator needs only SELECT on it.
CREATE VIEW idem_keys_in_progress AS
    SELECT k.scope, k.key, k.attempt, k.lease_until,
           k.lease_until <= now() AS lease_expired,
           k.checkpoint, k.checkpoint_data, k.created_at, k.expires_at
    FROM idem.keys k
    WHERE k.state = 'processing' AND k.expires_at > now();

COMMENT ON VIEW idem_keys_in_progress IS
    'idempotency keys held by an attempt in flight (committed processing claims), with their lease and last checkpoint';

REVOKE ALL ON idem_keys_in_progress FROM PUBLIC;
