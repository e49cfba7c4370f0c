"""psycopg 3 behind pgbouncer in transaction pooling: payments through idem
(BEGIN; claim; INSERT the charge; complete; COMMIT) with the driver's
defaults, or with PGBOUNCER=1 its setting for the pooler, prepare_threshold=None
(no named server-side statements).

    pay.py postgresql://USER@HOST:PORT/DB clash PREFIX
        client a pays 7 keys, then client b pays up to 7 on the same server
        connection ("shared"), and one more ("after"); then, while a third
        client holds a server connection in a transaction, a pays once more
        on one it has not used ("moved").  Prints for each step ok, or its
        first failure as SQLSTATE@PAYMENT.
    pay.py postgresql://USER@HOST:PORT/DB storm PREFIX CLIENTS PAYMENTS KEYS
        CLIENTS connections at once each make PAYMENTS payments, client i's
        j-th on key PREFIX-((i*PAYMENTS+j) % KEYS), a failed one retried up to
        10 times.  Prints "KEY STATUS" per payment and "error SQLSTATE MESSAGE"
        per failure.
"""
import os
import sys
import threading
from decimal import Decimal

import psycopg

URL = sys.argv[1]


def connect():
    if os.environ.get("PGBOUNCER") == "1":
        return psycopg.connect(URL, prepare_threshold=None)
    return psycopg.connect(URL)


def pay(conn, key):
    """One payment in one transaction; returns the claim's status."""
    with conn.transaction():
        (status,) = conn.execute(
            "SELECT status FROM idem_claim(%s, idem_fingerprint(%s::jsonb))",
            (key, '{"amount": "100.00"}'),
        ).fetchone()
        if status == "claimed":
            (payment,) = conn.execute(
                "INSERT INTO payments (idem_key, amount) VALUES (%s, %s) RETURNING id",
                (key, Decimal("100.00")),
            ).fetchone()
            conn.execute("SELECT idem_complete(%s, %s::jsonb)", (key, f'{{"payment": {payment}}}'))
    return status


def pay_many(conn, prefix, n):
    """The SQLSTATE of the first of n payments on fresh keys that fails, with
    its number ("42P05@6"), or ok."""
    for j in range(1, n + 1):
        try:
            pay(conn, f"{prefix}-{j}")
        except psycopg.Error as e:
            return f"{e.sqlstate}@{j}"
    return "ok"


def clash(prefix):
    a, b, holder = connect(), connect(), connect()
    print("shared", pay_many(a, f"{prefix}-a", 7), pay_many(b, f"{prefix}-b", 7))
    print("after", pay_many(b, f"{prefix}-after", 1))
    holder.execute("SELECT 1")
    print("moved", pay_many(a, f"{prefix}-moved", 1))
    holder.close()


def storm(prefix, clients, payments, keys):
    outs = [[] for _ in range(clients)]
    start = threading.Barrier(clients)

    def client(i):
        with connect() as conn:
            start.wait()
            for j in range(payments):
                key = f"{prefix}-{(i * payments + j) % keys}"
                status = "error"
                for _ in range(10):
                    try:
                        status = pay(conn, key)
                        break
                    except psycopg.Error as e:
                        outs[i].append(f"error {e.sqlstate} {str(e).splitlines()[0]}")
                outs[i].append(f"{key} {status}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in outs:
        print("\n".join(out))


try:
    if sys.argv[2] == "clash":
        clash(sys.argv[3])
    else:
        storm(sys.argv[3], *map(int, sys.argv[4:7]))
except psycopg.Error as e:
    print(f"error {e.sqlstate} {str(e).splitlines()[0]}")
    sys.exit(1)
