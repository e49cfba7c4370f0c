-- stripe_delivery(e): event evt_<e> as Stripe delivers it, the body and its
-- Stripe-Signature, signed now with pgcrypto's hmac and the secret
-- whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH.  A SQL function the planner
-- inlines (STABLE, not strict, returning a set), so a prepared statement
-- computes the delivery in its own plan: no function call, nothing parsed
-- again per execution.  Created in the first schema of search_path;
-- bench/run.sh and bench/wal.sh read this file.
CREATE FUNCTION stripe_delivery(e bigint, OUT payload text, OUT headers jsonb)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
	SELECT p, jsonb_build_object('Stripe-Signature', 't=' || t || ',v1=' ||
	           encode(hmac(t || '.' || p, 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', 'sha256'), 'hex'))
	FROM (SELECT '{"id":"evt_' || e || '","object":"event","type":"payment_intent.succeeded",'
	             '"data":{"object":{"id":"pi_3OE2sL","amount":2000,"currency":"usd"}}}' AS p,
	             extract(epoch FROM now())::bigint::text AS t) s
$$;
