// The example payment service in Node.js: node-postgres (pg) and node:http.
//
// POST /payments with an Idempotency-Key header books a payment once: the
// claim of the key, the payment and the response stored for replays commit
// together, so a retry is answered with the first response, byte for byte.
'use strict';
const http = require('node:http');
const { Pool } = require('pg');

// pg sends every query unnamed unless it is given a name, and this service
// names none: behind pgbouncer in transaction pooling (PGBOUNCER=1) nothing
// needs to change.
const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
// An idle connection that the server closes is replaced; without a listener
// the error would end the process.
pool.on('error', (err) => console.error(`idle connection lost: ${err.message}`));

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Returns { status, contentType, retryAfter, body }
async function pay(key, raw, req) {
  const db = await pool.connect();
  let broken;
  try {
    await db.query('BEGIN');
    const claim = (await db.query(
      'SELECT status, http_status, body, content_type, retry_after' +
      ' FROM idem_http_claim($1, idem_fingerprint($2::jsonb))', [key, raw])).rows[0];
    if (claim.status !== 'claimed') {
      // a replay, or a problem: in progress, mismatch, bad key
      await db.query('COMMIT');
      return { status: claim.http_status, contentType: claim.content_type,
               retryAfter: claim.retry_after, body: claim.body };
    }

    // PostgreSQL reads the amount from the raw body: JSON.parse would turn
    // it into a float (100.50 becomes 100.5).  pg returns the bigint id and
    // the numeric amount as strings, exactly.
    const payment = (await db.query(
      'INSERT INTO payments (idem_key, account, amount, currency)' +
      " VALUES ($1, $2, ($3::jsonb ->> 'amount')::numeric, $4) RETURNING id, amount",
      [key, req.account, raw, req.currency])).rows[0];
    await sleep(req.delay_ms || 0); // a slow gateway
    if (req.fail) throw new Error('failed on request'); // rolls back the payment and the claim
    const body = JSON.stringify({ id: payment.id, account: req.account,
                                  amount: payment.amount, currency: req.currency });
    await db.query('SELECT idem_http_respond($1, 201, $2)', [key, body]);
    await db.query('COMMIT');
    return { status: 201, contentType: 'application/json', retryAfter: null, body };
  } catch (err) {
    // a client whose ROLLBACK failed may still be in a transaction: it is
    // closed, not given back to the pool
    await db.query('ROLLBACK').catch((rollbackErr) => { broken = rollbackErr; });
    throw err;
  } finally {
    db.release(broken);
  }
}

async function handle(request, response) {
  const answer = ({ status, contentType, retryAfter, body }) => {
    const headers = { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) };
    if (retryAfter !== null) headers['Retry-After'] = retryAfter;
    response.writeHead(status, headers).end(body);
  };
  const json = 'application/json';
  if (request.method !== 'POST' || request.url !== '/payments') {
    return answer({ status: 404, contentType: json, retryAfter: null, body: '{"error":"not found"}' });
  }
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const raw = Buffer.concat(chunks).toString();
  let req;
  try {
    req = JSON.parse(raw);
  } catch {
    return answer({ status: 400, contentType: json, retryAfter: null, body: '{"error":"the body is not JSON"}' });
  }
  if (typeof req !== 'object' || req === null || Array.isArray(req)) {
    return answer({ status: 400, contentType: json, retryAfter: null, body: '{"error":"the body is not a JSON object"}' });
  }
  try {
    // the header as sent, null when absent: idem_http_claim answers 400
    answer(await pay(request.headers['idempotency-key'] ?? null, raw, req));
  } catch (err) {
    console.error(`payment failed: ${err.message} (SQLSTATE ${err.code})`);
    answer({ status: 500, contentType: json, retryAfter: null, body: JSON.stringify({ error: err.message }) });
  }
}

const port = Number(process.env.PORT);
http.createServer(handle).listen(port, '127.0.0.1', () => console.log(`listening on ${port}`));
