/* idem--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.4'" to load this file. \quit

-- The response of an HTTP request as the application sent it, so that a
-- replay is the same bytes whatever the driver (a jsonb response comes back
-- with its keys reordered and its numbers rewritten by the client's JSON
-- parser).  Both null for keys finished by idem_complete and idem_fail.
-- Adding nullable columns without a default rewrites nothing.
ALTER TABLE idem.keys ADD COLUMN http_status smallint, ADD COLUMN body text;

-- A claim answered in HTTP terms (IETF Idempotency-Key draft): what to send
-- when the request is not this one's to do, and a bounded wait for a
-- duplicate of a request still in flight.
CREATE FUNCTION idem_http_claim(key text, fingerprint bytea DEFAULT NULL,
                                scope text DEFAULT '', wait interval DEFAULT '0 s',
                                lease interval DEFAULT NULL, ttl interval DEFAULT NULL,
                                OUT status text, OUT http_status integer, OUT body text,
                                OUT content_type text, OUT retry_after integer,
                                OUT token bigint, OUT attempt integer,
                                OUT checkpoint text, OUT checkpoint_data jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_http_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Finish the attempt with the response exactly as sent, for replays.
CREATE FUNCTION idem_http_respond(key text, http_status integer, body text,
                                  scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_http_respond' LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_http_claim(text, bytea, text, interval, interval, interval),
                       idem_http_respond(text, integer, text, text, bigint) FROM PUBLIC;
