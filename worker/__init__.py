"""The worker side of the service, in three rooms:

engine/     the decision engine: a request in, typed answers out (tokenizer, rows, an executor's forward
            pass, decoding); its executors, `reference` (torch, fp32) and `cuda` (the bundle, CUDA graphs).
            No Celery and no Redis: `laya-run` and the recipes use it as it is.
service/    the Celery shell around one engine: taking work in class order from Redis, running it one
            request at a time, storing answers, heartbeats, redelivery.
commands/   the command-line tools: laya-run, laya-bundle, laya-stack, and the checkpoint synthesizer.
"""
