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

// The source text of the value of key in the JSON object raw (already
// parsed): JSON.parse would read the amount 100.50 as 100.5, and 1e2 as 100.
function sourceOf(raw, key) {
  let depth = 0;
  let name = null; // the key of the value that comes next, in the object itself
  let text;
  for (const [t] of raw.matchAll(/"(?:[^"\\]|\\.)*"|[^\s"{}[\],:]+|\S/g)) {
    if (depth === 1 && t === ',') name = null;
    else if (depth === 1 && name === null && t !== '}') name = JSON.parse(t);
    else if (depth === 1 && t !== ':' && t !== '}' && name === key) text = t; // the last one wins
    if (t === '{' || t === '[') depth++;
    else if (t === '}' || t === ']') depth--;
  }
  return text;
}

class Invalid extends Error {
  // A request that is not a payment: the detail, and the field at fault
  constructor(detail, field) {
    super(detail);
    this.field = field;
  }
}

// The payment request in the body data, checked field by field (the same
// checks in every example service); throws Invalid
function validate(data) {
  let raw;
  let req;
  try {
    raw = new TextDecoder('utf-8', { fatal: true }).decode(data);
    req = JSON.parse(raw);
  } catch {
    // not UTF-8, not JSON
  }
  if (typeof req !== 'object' || req === null || Array.isArray(req)) {
    throw new Invalid('the body must be a JSON object');
  }
  if (typeof req.account !== 'string' || req.account === '') {
    throw new Invalid('account must be a non-empty string', 'account');
  }
  const amount = sourceOf(raw, 'amount');
  if (!/^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$/.test(amount ?? '') || !/[1-9]/.test(amount)) {
    throw new Invalid('amount must be a positive number with at most 2 decimals', 'amount');
  }
  if (typeof req.currency !== 'string' || !/^[A-Z]{3}$/.test(req.currency)) {
    throw new Invalid('currency must be 3 capital letters (ISO 4217)', 'currency');
  }
  // the test knobs, optional
  if ('delay_ms' in req && !(/^(0|[1-9][0-9]{0,4})$/.test(sourceOf(raw, 'delay_ms')) && req.delay_ms <= 10000)) {
    throw new Invalid('delay_ms must be an integer from 0 to 10000', 'delay_ms');
  }
  if ('fail' in req && typeof req.fail !== 'boolean') {
    throw new Invalid('fail must be true or false', 'fail');
  }
  return { raw, req, amount };
}

// An answer with a problem body (RFC 9457), as idem's own; field names the
// request's member at fault
function problem(status, title, detail, field) {
  return { status, contentType: 'application/problem+json', retryAfter: null,
           body: JSON.stringify({ type: 'about:blank', title, status, detail, field }) };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Returns { status, contentType, retryAfter, body, replayed }
async function pay(key, { raw, req, amount }) {
  const db = await pool.connect();
  let broken;
  try {
    await db.query('BEGIN');
    const claim = (await db.query(
      'SELECT status, http_status, body, content_type, retry_after' +
      ' FROM idem_http_claim($1, idem_fingerprint($2::jsonb))', [key, raw])).rows[0];
    if (claim.status !== 'claimed') {
      // a replay (completed, failed), or a problem: in progress, mismatch, bad key
      await db.query('COMMIT');
      return { status: claim.http_status, contentType: claim.content_type,
               retryAfter: claim.retry_after, body: claim.body,
               replayed: claim.status === 'completed' || claim.status === 'failed' };
    }

    // The amount as written in the body, never a float (100.50 would
    // become 100.5).  pg returns the bigint id and the numeric amount as
    // strings, exactly.
    const payment = (await db.query(
      'INSERT INTO payments (idem_key, account, amount, currency)' +
      ' VALUES ($1, $2, $3, $4) RETURNING id, amount',
      [key, req.account, amount, req.currency])).rows[0];
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
  const answer = ({ status, contentType, retryAfter, body, replayed }) => {
    const headers = { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) };
    if (retryAfter !== null) headers['Retry-After'] = retryAfter;
    if (replayed) headers['Idempotent-Replayed'] = 'true';
    response.writeHead(status, headers).end(body);
  };
  if (request.method !== 'POST' || request.url !== '/payments') {
    return answer(problem(404, 'Not Found', 'POST /payments books a payment.'));
  }
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  let checked;
  try {
    // before the claim: a request refused here writes nothing and leaves
    // its key unused, for the corrected request
    checked = validate(Buffer.concat(chunks));
  } catch (err) {
    return answer(problem(400, 'Invalid request', err.message, err.field));
  }
  try {
    // the header as sent, null when absent: idem_http_claim answers 400
    answer(await pay(request.headers['idempotency-key'] ?? null, checked));
  } catch (err) {
    console.error(`payment failed: ${err.message} (SQLSTATE ${err.code})`);
    answer(problem(500, 'Internal Server Error',
                   'The payment was not booked: retry it with the same Idempotency-Key.'));
  }
}

const port = Number(process.env.PORT);
http.createServer(handle).listen(port, '127.0.0.1', () => console.log(`listening on ${port}`));
