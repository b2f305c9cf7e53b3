"""The wire between the API and the workers: Celery task messages on Redis lists, consumed by Celery's worker
through kombu's Redis transport. This package is the one owner of every departure from stock Celery and kombu;
everything else uses them as they are (celery 5.7 and kombu 5.7, the range pyproject.toml states).

The departures, what each buys, and where it is checked against the installed kombu:

- **The API builds the task message itself** (`messages`: Celery's own protocol code makes the headers and the
  body, this wraps them as kombu's Redis channel does) **and queues it with the ENQUEUE script** (`queues`), in
  the pipeline that then waits for the answer. Buys: a depth bound checked and the message queued in one atomic
  step (admission, app/admission.py), and one round trip for enqueue and wait: at its introduction the enqueue
  stage fell 0.76 -> 0.14 ms and the sync overhead 3.12 -> 2.71 ms on the H200
  (docs/records/sync-overhead-h200.csv, f9bd9c2 -> 03adab8). Checked: tests/service/test_broker_messages.py
  compares the bytes with what `send_task` queues.
- **The consumer waits on a doorbell and takes with the TAKE script** (`transport`: kombu's private
  `Channel._brpop_start` and `_brpop_read`, for a channel consuming exactly one model's queues). Buys: work taken
  in class order (kombu's BRPOP rotates between queues) and a message recorded as unacknowledged, in kombu's own
  `unacked` hash and `unacked_index` set, in the step that takes it (with BRPOP, a worker killed between the
  take and the record lost the message); its writes come before its pop, so a Redis past its maxmemory, which
  refuses a script's writes but not its pop, leaves the message queued. Checked: tests/service/test_broker_transport.py,
  which also fails with a message naming this package when a kombu internal it relies on moves.
- **kombu's `QoS.append` sends nothing for a message TAKE recorded** (`transport.QoS`, state kept on the
  channel). Buys: a round trip on every task's way to running, 0.12 ms at the median on the 2-core CPU machine
  (docs/records/broker-round-trips-cpu-2026-12-04.json), 0.21 ms on the H200 host
  (docs/records/broker-round-trips-h200-2026-12-05.json).
- **A task's answer removes its message's unacknowledged record** in the answer's own script
  (worker.service.lifecycle sends `transport.settle_lua`'s lines). Buys: no moment at which a task is answered and
  its message still recorded as unacknowledged (a worker dying then would leave it to be redelivered, and settled
  unrun), and the removal of the records of work a batch lets pass (taken by TAKE between two of its windows,
  which Celery never acknowledges).

- **A Redis past its maxmemory does not stop the worker** (`transport.QoS.ack`, `QoS.restore_visible`). kombu
  acknowledges in a MULTI, which such a Redis refuses whole, and takes its restore lock with SET; either error
  stopped Celery's consumer and the worker with it. The acknowledgement goes in a plain pipeline (its ZREM and
  HDEL are allowed there) and the restore waits for its next turn. Checked: tests/service/test_broker_transport.py
  and tests/service/test_admission.py (work queued and answered while Redis is full: none lost, the worker alive).

Everything else the service and its recipes know of kombu's records and Celery's messages is here too: which
message a task came in and its argument (`delivery`: from Celery's request, or from a message TAKE took), a header
replaced on the way to the task (`delivery.replace_header`, for the request trace: Celery's worker Request's
`request_dict`), the records' reading and kombu's own restore for redelivery and for a request a failed worker
leaves (`transport.Records`, `transport.held_task_ids`), and kombu's stock transport driven from outside
(`transport.StockRecords`: its `QoS.append` and `QoS.ack`, which `transport.QoS` overrides, timed by
recipe/broker_round_trips.py; `transport.publish` and `transport.purge`, for the tests and recipes that play another
client). `transport` is the only module that imports kombu beyond its public exceptions.
tests/service/test_broker_transport.py checks each of these internals against the installed Celery and kombu.

Dropped: skipping kombu's `QoS.ack` for a task whose answer had removed its record already. It bought no
correctness, and no caller waits for the acknowledgement's round trip (0.10 ms here), which comes after the answer
is sent; it needed a module-level set of settled delivery tags, which also kept forever the tags of work a batch
let pass. Celery's acknowledgement now removes what is left, which is nothing.
"""
