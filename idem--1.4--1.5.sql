/* idem--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.5'" to load this file. \quit

-- 1.5 changes the address rule of idem_webhook_receive: a source that lists
-- allowed_ips now refuses a delivery whose client_ip is NULL or a network
-- rather than one host, and takes an IPv4-mapped IPv6 address
-- (::ffff:192.0.2.10, as dual-stack servers report an IPv4 peer) as its
-- IPv4 form.  The rule is in the library, not in this script: it holds in
-- every database as soon as the new library is loaded, whatever version
-- the database is at, because an allowlist that lets an unknown address
-- through is a hole, not a behaviour to keep until the update.  The version
-- marks the change, and the function's comment states the rule where \df+
-- shows it.  Nothing is dropped or re-created, so every grant stays.
COMMENT ON FUNCTION idem_webhook_receive(text, text, jsonb, inet) IS
    'for a source with allowed_ips, client_ip must be one host inside one of them (an IPv4-mapped IPv6 address also matches as its IPv4 form), and a NULL or a network is rejected with reason ip; a source without allowed_ips takes any address';
