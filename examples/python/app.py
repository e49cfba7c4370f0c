"""The example payment service in Python: psycopg 3, its connection pool and
the standard library's HTTP server.

POST /payments with an Idempotency-Key header books a payment once: the
claim of the key, the payment and the response stored for replays commit
together, so a retry is answered with the first response, byte for byte.
"""
import json
import logging
import os
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from psycopg_pool import ConnectionPool

# Behind pgbouncer in transaction pooling the next transaction may run on
# another server connection, where a statement prepared on this one does not
# exist: never prepare.  (psycopg prepares a query at its 6th execution.)
settings = {"prepare_threshold": None} if os.environ.get("PGBOUNCER") == "1" else {}
pool = ConnectionPool(os.environ["DATABASE_URL"], min_size=10, kwargs=settings)


def pay(key, raw, req):
    """Returns (HTTP status, Content-Type, Retry-After or None, body)."""
    # One transaction: committed at the end of the block, rolled back on an exception
    with pool.connection() as conn:
        status, http_status, body, content_type, retry_after = conn.execute(
            "SELECT status, http_status, body, content_type, retry_after"
            " FROM idem_http_claim(%s, idem_fingerprint(%s::jsonb))",
            (key, raw)).fetchone()
        if status != "claimed":
            # a replay, or a problem: in progress, mismatch, bad key
            return http_status, content_type, retry_after, body

        (payment_id,) = conn.execute(
            "INSERT INTO payments (idem_key, account, amount, currency)"
            " VALUES (%s, %s, %s, %s) RETURNING id",
            (key, req["account"], req["amount"], req["currency"])).fetchone()
        time.sleep(req.get("delay_ms", 0) / 1000)  # a slow gateway
        if req.get("fail"):
            raise RuntimeError("failed on request")  # rolls back the payment and the claim
        # The id as a string: a JavaScript client would round a number above 2^53.
        body = json.dumps({"id": str(payment_id), "account": req["account"],
                           "amount": str(req["amount"]), "currency": req["currency"]})
        conn.execute("SELECT idem_http_respond(%s, 201, %s)", (key, body))
        return 201, "application/json", None, body


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/payments":
            return self.answer(404, "application/json", None, '{"error": "not found"}')
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        try:
            # Decimal: 100.50 stays 100.50, never a float
            req = json.loads(raw, parse_float=Decimal)
        except ValueError:
            return self.answer(400, "application/json", None, '{"error": "the body is not JSON"}')
        if not isinstance(req, dict):
            return self.answer(400, "application/json", None, '{"error": "the body is not a JSON object"}')
        try:
            # the header as sent, None when absent: idem_http_claim answers 400
            self.answer(*pay(self.headers.get("Idempotency-Key"), raw, req))
        except Exception as e:
            logging.error("payment failed: %s (SQLSTATE %s)", e, getattr(e, "sqlstate", None))
            self.answer(500, "application/json", None, json.dumps({"error": str(e)}))

    def answer(self, status, content_type, retry_after, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # room for a burst of requests (the default is 5)


pool.wait()
server = Server(("127.0.0.1", int(os.environ["PORT"])), Handler)
print("listening on", server.server_port, flush=True)
server.serve_forever()
