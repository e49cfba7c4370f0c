#!/usr/bin/env python3
"""Apply the payment callbacks of a RabbitMQ queue to the ledger, each once.

RabbitMQ delivers at least once: a message comes again when the consumer dies
before its ack reaches the broker, when the connection drops or the broker
restarts, and when the sender publishes it twice.  So each message is applied
in one transaction with idem_webhook, which records its id: a delivery whose
id is recorded was applied already, and is only acknowledged.  The ack is
sent after COMMIT: a consumer that dies between the two gets the message
again, and finds it applied.

Environment: AMQP_URL (amqp://user:password@host:5672/vhost), DATABASE_URL
(postgresql://user@host:port/db) and QUEUE.  A lost connection to the broker
or to the database ends the consumer: run it under a supervisor that starts
it again.  The broker delivers again whatever was not acknowledged.
"""
import json
import os
import signal
import time
from decimal import Decimal

import pika
import psycopg

SOURCE = "payments-queue"  # idem_webhook's namespace for this queue's message ids
# A test knob: SIGKILL ourselves right after the N-th COMMIT, before its ack.
CRASH_AFTER_COMMIT = int(os.environ.get("CRASH_AFTER_COMMIT", "0"))

db = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
commits = 0


def on_message(channel, method, props, body):
    global commits
    if not props.message_id:
        # Without an id a redelivery cannot be told from a new message, so
        # applying it risks applying it twice: refuse it (to the queue's
        # dead-letter exchange, if it has one) instead of requeueing it.
        print("rejected: no message_id", flush=True)
        channel.basic_reject(method.delivery_tag, requeue=False)
        return
    payment = json.loads(body, parse_float=Decimal)
    try:
        with db.transaction():  # BEGIN ... COMMIT, or ROLLBACK on an error
            first = db.execute("SELECT idem_webhook(%s, %s)",
                               (SOURCE, props.message_id)).fetchone()[0]
            if first:
                db.execute("INSERT INTO ledger (message_id, account, amount, currency)"
                           " VALUES (%s, %s, %s, %s)",
                           (props.message_id, payment["account"], payment["amount"],
                            payment["currency"]))
    except psycopg.Error as e:
        if db.broken:
            raise
        # Rolled back, and the record of the id with it: have it delivered
        # again, after a pause so that an error that lasts does not spin.
        print(f"{props.message_id} failed, requeued: {e.sqlstate} {e.diag.message_primary}",
              flush=True)
        time.sleep(1)
        channel.basic_nack(method.delivery_tag, requeue=True)
        return
    outcome = "applied" if first else "duplicate"
    print(f"{props.message_id} {outcome} redelivered={int(method.redelivered)}", flush=True)
    commits += 1
    if commits == CRASH_AFTER_COMMIT:
        os.kill(os.getpid(), signal.SIGKILL)
    channel.basic_ack(method.delivery_tag)


connection = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
channel = connection.channel()
channel.queue_declare(os.environ["QUEUE"], durable=True)
# At most 10 unacknowledged messages on their way to us at a time
channel.basic_qos(prefetch_count=10)
channel.basic_consume(os.environ["QUEUE"], on_message)  # manual acks: auto_ack is off
channel.start_consuming()
