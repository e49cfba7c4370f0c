-- The database of the example payment services in examples/<language>/, one
-- per language and driver, all the same service (doc/clients.md): POST
-- /payments with an Idempotency-Key header claims the key with
-- idem_http_claim, books the payment in the table below and stores its
-- response with idem_http_respond, in one transaction, so that a retry is
-- answered with the first response, byte for byte, and the payment is booked
-- once.  Run it as a superuser in the database the service connects to; the
-- service logs in as shop, which can book payments and use idem's HTTP
-- functions and nothing else.

CREATE EXTENSION IF NOT EXISTS idem;

-- The ids start above 2^53, the largest integer a JSON parser that reads
-- numbers as doubles (JavaScript's) keeps exactly: a service that loses
-- digits of an id shows it at once.
CREATE TABLE payments (
    id bigint GENERATED ALWAYS AS IDENTITY (START WITH 9007199254740993) PRIMARY KEY,
    idem_key text NOT NULL,
    account text,
    amount numeric,
    currency text,
    created_at timestamptz DEFAULT now()
);

-- Its password is the one of the examples' DATABASE_URL: choose your own
-- (\password shop in psql).  A password works on Debian's pg_hba.conf,
-- which asks it of every connection over TCP (scram-sha-256).
CREATE ROLE shop LOGIN PASSWORD 'shop';
-- INSERT ... RETURNING id, amount needs SELECT on those columns; the
-- identity column needs no grant on its sequence.
GRANT INSERT (idem_key, account, amount, currency), SELECT (id, amount) ON payments TO shop;
GRANT EXECUTE ON FUNCTION idem_http_claim(text, bytea, text, interval, interval, interval),
    idem_http_respond(text, integer, text, text, bigint), idem_fingerprint(jsonb) TO shop;
