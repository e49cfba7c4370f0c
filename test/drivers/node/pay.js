// node-pg behind pgbouncer in transaction pooling: payments through idem
// (BEGIN; claim; INSERT the charge; complete; COMMIT) with named queries
// (node-pg prepares a query given a name once per connection), or with
// PGBOUNCER=1 without names: node-pg's default, each query parsed with its
// execution.
//
//   node pay.js postgresql://USER@HOST:PORT/DB clash PREFIX
//     client a pays 7 keys, then client b pays up to 7 on the same server
//     connection ("shared"), and one more ("after"); then, while a third
//     client holds a server connection in a transaction, a pays once more
//     on one it has not used ("moved").  Prints for each step ok, or its
//     first failure as SQLSTATE@PAYMENT.
//   node pay.js postgresql://USER@HOST:PORT/DB storm PREFIX CLIENTS PAYMENTS KEYS
//     CLIENTS connections at once each make PAYMENTS payments, client i's
//     j-th on key PREFIX-((i*PAYMENTS+j) % KEYS), a failed one retried up to
//     10 times.  Prints "KEY STATUS" per payment and "error SQLSTATE MESSAGE"
//     per failure.
'use strict'
const pg = require('pg')

const [url, mode, prefix, ...counts] = process.argv.slice(2)
const named = process.env.PGBOUNCER !== '1'

async function connect () {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return client
}

// A query, named when named queries are on
function query (client, name, text, values) {
  return client.query(named ? { name, text, values } : { text, values })
}

// One payment in one transaction; resolves to the claim's status
async function pay (client, key) {
  await client.query('BEGIN')
  try {
    const claim = await query(client, 'claim',
      'SELECT status FROM idem_claim($1, idem_fingerprint($2::jsonb))', [key, '{"amount": "100.00"}'])
    const status = claim.rows[0].status
    if (status === 'claimed') {
      // payments.id is a bigint: node-pg returns it as a string, kept as is
      const charge = await query(client, 'charge',
        'INSERT INTO payments (idem_key, amount) VALUES ($1, $2) RETURNING id', [key, '100.00'])
      await query(client, 'complete', 'SELECT idem_complete($1, $2::jsonb)',
        [key, `{"payment": ${charge.rows[0].id}}`])
    }
    await client.query('COMMIT')
    return status
  } catch (e) {
    await client.query('ROLLBACK')
    throw e
  }
}

const describe = (e) => `error ${e.code} ${e.message.split('\n')[0]}`

// The SQLSTATE of the first of n payments on fresh keys that fails, with
// its number ("42P05@6"), or ok
async function payMany (client, keyPrefix, n) {
  for (let j = 1; j <= n; j++) {
    try {
      await pay(client, `${keyPrefix}-${j}`)
    } catch (e) {
      return `${e.code}@${j}`
    }
  }
  return 'ok'
}

async function clash () {
  const [a, b, holder] = [await connect(), await connect(), await connect()]
  console.log('shared', await payMany(a, `${prefix}-a`, 7), await payMany(b, `${prefix}-b`, 7))
  console.log('after', await payMany(b, `${prefix}-after`, 1))
  await holder.query('BEGIN')
  await holder.query('SELECT 1')
  console.log('moved', await payMany(a, `${prefix}-moved`, 1))
  await Promise.all([a, b, holder].map((c) => c.end()))
}

async function storm (clients, payments, keys) {
  const conns = await Promise.all(Array.from({ length: clients }, connect))
  const outs = await Promise.all(conns.map(async (client, i) => {
    const out = []
    for (let j = 0; j < payments; j++) {
      const key = `${prefix}-${(i * payments + j) % keys}`
      let status = 'error'
      for (let t = 0; t < 10 && status === 'error'; t++) {
        try {
          status = await pay(client, key)
        } catch (e) {
          out.push(describe(e))
        }
      }
      out.push(`${key} ${status}`)
    }
    await client.end()
    return out.join('\n')
  }))
  console.log(outs.join('\n'))
}

(mode === 'clash' ? clash() : storm(...counts.map(Number))).catch((e) => {
  console.log(describe(e))
  process.exit(1)
})
