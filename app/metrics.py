"""GET /metrics in Prometheus text format: requests by route and status, latency, queue depth, executor time.

Request metrics are counted in the API process (across gunicorn processes when PROMETHEUS_MULTIPROC_DIR
is set, as `laya-api` does for LAYA_API_PROCESSES > 1). Queue depth, ready workers and the executor-time
histogram are read from Redis at scrape time, so every API instance reports the same fleet-wide values.
"""

from __future__ import annotations

import itertools
import os
import time

from flask import Blueprint, Flask, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from app.models import ready_workers
from laya_common import contract

bp = Blueprint("metrics", __name__)

# Label values come from a fixed set, so no request can add a series: a method outside this set counts as
# "other", a path no route matches as "unmatched" (a made-up method or path each added one before).
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class FleetCollector:
    """Per model: queue depth, ready workers and executor time, read from Redis when scraped."""

    def __init__(self, dispatcher, models: tuple[str, ...]) -> None:
        self.dispatcher, self.models = dispatcher, models

    def collect(self):
        depth = GaugeMetricFamily(
            "laya_queue_depth", "Tasks waiting in the model's queue of each class of work", labels=["model", "class"]
        )
        ready = GaugeMetricFamily("laya_workers_ready", "Workers warm and serving the model", labels=["model"])
        executor = HistogramMetricFamily(
            "laya_executor_seconds", "Engine time per task (batch: per chunk)", labels=["model"]
        )
        try:
            ready_counts = ready_workers(self.dispatcher.workers(), self.models)
            for model in self.models:
                for work_class, waiting in self.dispatcher.queue_depths(model).items():
                    depth.add_metric([model, work_class], waiting)
                ready.add_metric([model], ready_counts[model])
                counts = self.dispatcher.executor_histogram(model)
                cumulative = itertools.accumulate(counts.get(f"bucket:{b}", 0.0) for b in contract.EXECUTOR_BUCKETS)
                buckets = [(str(b), n) for b, n in zip(contract.EXECUTOR_BUCKETS, cumulative, strict=True)]
                executor.add_metric(
                    [model], buckets + [("+Inf", counts.get("count", 0.0))], sum_value=counts.get("sum", 0.0)
                )
        except Exception:  # Redis unreachable: the request metrics are still worth scraping
            return
        yield from (depth, ready, executor)


def init_app(app: Flask, dispatcher) -> None:
    multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    registry = None if multiprocess else CollectorRegistry()
    requests = Counter(
        "laya_http_requests",
        "HTTP requests by route, method and status",
        ["route", "method", "status"],
        registry=registry,
    )
    latency = Histogram(
        "laya_http_request_seconds",
        "HTTP request latency by route",
        ["route", "method"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    app.extensions["laya_metrics"] = (registry, FleetCollector(dispatcher, app.config["SERVED_MODELS"]))

    @app.before_request
    def _start_clock() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def _count(response: Response) -> Response:
        route = request.url_rule.rule if request.url_rule else "unmatched"
        method = request.method if request.method in KNOWN_METHODS else "other"
        requests.labels(route, method, str(response.status_code)).inc()
        latency.labels(route, method).observe(time.perf_counter() - g.get("started", time.perf_counter()))
        return response

    app.register_blueprint(bp)


@bp.get("/metrics")
def metrics() -> Response:
    registry, fleet = current_app.extensions["laya_metrics"]
    if registry is None:  # gunicorn processes share their counts through PROMETHEUS_MULTIPROC_DIR
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    scrape = CollectorRegistry()
    scrape.register(fleet)
    return Response(generate_latest(registry) + generate_latest(scrape), mimetype=CONTENT_TYPE_LATEST)
