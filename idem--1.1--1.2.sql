/* idem--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.2'" to load this file. \quit

-- A claim of a new key is kept in the claiming backend's memory until its
-- row is written (doc/api.md), and idem_lookup shows it there.  A parallel
-- worker has no such memory, so idem_lookup runs in the leader only.
ALTER FUNCTION idem_lookup(text, text) PARALLEL RESTRICTED;
