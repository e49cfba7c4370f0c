"""The example payment service in Python: psycopg 3, its connection pool and
the standard library's HTTP server.

POST /payments with an Idempotency-Key header books a payment once: the
claim of the key, the payment and the response stored for replays commit
together, so a retry is answered with the first response, byte for byte.
"""
import json
import logging
import os
import re
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from psycopg_pool import ConnectionPool

# Behind pgbouncer in transaction pooling the next transaction may run on
# another server connection, where a statement prepared on this one does not
# exist: never prepare.  (psycopg prepares a query at its 6th execution.)
settings = {"prepare_threshold": None} if os.environ.get("PGBOUNCER") == "1" else {}
pool = ConnectionPool(os.environ["DATABASE_URL"], min_size=10, kwargs=settings)


class Number(str):
    """A JSON number as it is written: 100.50 stays 100.50, never a float."""


def is_string(value):
    """Is value a JSON string (a Number is a str too)?"""
    return isinstance(value, str) and not isinstance(value, Number)


class Invalid(Exception):
    """A request that is not a payment: the detail, and the field at fault."""


def reject_constant(name):
    """Refuses NaN and Infinity, which Python's json accepts and JSON has not."""
    raise ValueError(f"{name} is not JSON")


# The checks of a payment request, the same in every example service
AMOUNT = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]{1,2})?")
CURRENCY = re.compile(r"[A-Z]{3}")
DELAY_MS = re.compile(r"0|[1-9][0-9]{0,4}")


def validate(data):
    """The payment request in the body data, checked field by field; raises Invalid."""
    try:
        req = json.loads(data.decode(), parse_float=Number, parse_int=Number,
                         parse_constant=reject_constant)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deep
        req = None
    if not isinstance(req, dict):
        raise Invalid("the body must be a JSON object", None)
    if not is_string(req.get("account")) or req["account"] == "":
        raise Invalid("account must be a non-empty string", "account")
    amount = req.get("amount")
    if not isinstance(amount, Number) or not AMOUNT.fullmatch(amount) or Decimal(amount) == 0:
        raise Invalid("amount must be a positive number with at most 2 decimals", "amount")
    if not is_string(req.get("currency")) or not CURRENCY.fullmatch(req["currency"]):
        raise Invalid("currency must be 3 capital letters (ISO 4217)", "currency")
    # the test knobs, optional
    delay = req.get("delay_ms", Number(0))
    if not isinstance(delay, Number) or not DELAY_MS.fullmatch(delay) or int(delay) > 10000:
        raise Invalid("delay_ms must be an integer from 0 to 10000", "delay_ms")
    if not isinstance(req.get("fail", False), bool):
        raise Invalid("fail must be true or false", "fail")
    return req


def problem(status, title, detail, field=None):
    """An answer with a problem body (RFC 9457), as idem's own; field names the member at fault."""
    p = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if field is not None:
        p["field"] = field
    return status, "application/problem+json", None, json.dumps(p, separators=(",", ":")), False


def pay(key, raw, req):
    """Returns (HTTP status, Content-Type, Retry-After or None, body, replayed)."""
    # One transaction: committed at the end of the block, rolled back on an exception
    with pool.connection() as conn:
        status, http_status, body, content_type, retry_after = conn.execute(
            "SELECT status, http_status, body, content_type, retry_after"
            " FROM idem_http_claim(%s, idem_fingerprint(%s::jsonb))",
            (key, raw)).fetchone()
        if status != "claimed":
            # a replay (completed, failed), or a problem: in progress, mismatch, bad key
            return http_status, content_type, retry_after, body, status in ("completed", "failed")

        (payment_id,) = conn.execute(
            "INSERT INTO payments (idem_key, account, amount, currency)"
            " VALUES (%s, %s, %s, %s) RETURNING id",
            (key, req["account"], Decimal(req["amount"]), req["currency"])).fetchone()
        time.sleep(int(req.get("delay_ms", 0)) / 1000)  # a slow gateway
        if req.get("fail"):
            raise RuntimeError("failed on request")  # rolls back the payment and the claim
        # The id as a string: a JavaScript client would round a number above 2^53.
        body = json.dumps({"id": str(payment_id), "account": req["account"],
                           "amount": req["amount"], "currency": req["currency"]})
        conn.execute("SELECT idem_http_respond(%s, 201, %s)", (key, body))
        return 201, "application/json", None, body, False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/payments":
            return self.answer(*problem(404, "Not Found", "POST /payments books a payment."))
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            # before the claim: a request refused here writes nothing and
            # leaves its key unused, for the corrected request
            req = validate(data)
        except Invalid as e:
            return self.answer(*problem(400, "Invalid request", *e.args))
        try:
            # the header as sent, None when absent: idem_http_claim answers 400
            self.answer(*pay(self.headers.get("Idempotency-Key"), data.decode(), req))
        except Exception as e:
            logging.error("payment failed: %s (SQLSTATE %s)", e, getattr(e, "sqlstate", None))
            self.answer(*problem(500, "Internal Server Error",
                                 "The payment was not booked: retry it with the same Idempotency-Key."))

    def answer(self, status, content_type, retry_after, body, replayed):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # room for a burst of requests (the default is 5)


pool.wait()
server = Server(("127.0.0.1", int(os.environ["PORT"])), Handler)
print("listening on", server.server_port, flush=True)
server.serve_forever()
