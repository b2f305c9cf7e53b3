"""Batch scoring: POST /v1/batches (shared questions over many states, or JSON lines) -> 202; GET pages results."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from app.dispatch import dispatcher, wait_if_asked
from app.errors import ApiError
from app.payloads import batch_request
from app.schemas import PageSchema
from worker.contract import wire_json

bp = Blueprint("batches", __name__, url_prefix="/v1/batches")


@bp.post("")
def submit():
    batch, model, total = batch_request()
    d = dispatcher()
    d.require_ready(model)
    batch_id = d.submit_batch(batch, model=model, total=total)
    return (
        jsonify({"id": batch_id, "status": "queued"}),
        202,
        {"Location": f"/v1/batches/{batch_id}", "x-laya-model": model},
    )


@bp.get("/<batch_id>")
def fetch(batch_id: str):
    """Progress and one page of results (?offset=&limit=, at most BATCH_PAGE_SIZE), after waiting up to `wait`
    seconds for the batch to finish. :raise 404: unknown id."""
    page = PageSchema().load(request.args)
    page_size = current_app.config["BATCH_PAGE_SIZE"]
    limit = page.get("limit", page_size)
    if limit > page_size:
        raise ApiError("validation", f"limit {limit}; at most {page_size} results per page", field="limit")
    wait_if_asked(batch_id, "batch", page["wait"])
    body, results = dispatcher().batch(batch_id, offset=page["offset"], limit=limit)
    return page_response(body, results)


def page_response(body: dict, results: list[bytes]) -> Response:
    """The page as every body is written (`contract.wire_json`), "results" after "offset", each result spliced in
    as the worker stored it, in the same form: parsing and writing again a page of 1,000 results took ~17 ms."""
    head = wire_json({**body, "results": []})  # keys are fixed names: the first '"results": []' is the key's
    text = head.replace('"results": []', '"results": [' + ", ".join(r.decode() for r in results) + "]", 1)
    return current_app.response_class(text + "\n", mimetype="application/json")
