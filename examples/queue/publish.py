#!/usr/bin/env python3
"""Publish payment callbacks to a RabbitMQ queue so that none is lost.

Reads one message a line from stdin: its id, a space, its JSON body.  The id
goes in the message_id property, which the consumer deduplicates on; a
message published again (a gateway's retry) keeps its id.  The queue is
durable and the messages persistent, so both survive a broker restart; with
publisher confirms, basic_publish returns once the broker has the message
on disk, and raises when the broker refused it or could not route it
(mandatory).  Run again after a failure, it publishes again the messages
already confirmed: duplicates, which the consumer recognises.

Environment: AMQP_URL (amqp://user:password@host:5672/vhost) and QUEUE.
"""
import os
import sys

import pika

queue = os.environ["QUEUE"]
connection = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
channel = connection.channel()
channel.queue_declare(queue, durable=True)
channel.confirm_delivery()
for line in sys.stdin:
    message_id, body = line.rstrip("\n").split(" ", 1)
    properties = pika.BasicProperties(message_id=message_id, content_type="application/json",
                                      delivery_mode=pika.spec.PERSISTENT_DELIVERY_MODE)
    channel.basic_publish("", queue, body, properties, mandatory=True)
connection.close()
