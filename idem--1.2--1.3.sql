/* idem--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.3'" to load this file. \quit

-- WeChat Pay notifications carry their content encrypted (AES-256-GCM under
-- the merchant's APIv3 key): the plaintext of the resource, NULL when it
-- does not authenticate.  It depends on its arguments alone.  The
-- "wechatpay" scheme of idem_webhook_verify needs no SQL change.
CREATE FUNCTION idem_wechatpay_decrypt(api_v3_key text, resource jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_wechatpay_decrypt' LANGUAGE C IMMUTABLE PARALLEL SAFE;

REVOKE ALL ON FUNCTION idem_wechatpay_decrypt(text, jsonb) FROM PUBLIC;
