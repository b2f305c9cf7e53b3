"""Batch scoring: POST /v1/batches (shared questions over many states, or JSON lines) -> 202 (503 + Retry-After past
LAYA_MAX_QUEUED_BATCHES); GET pages results; DELETE cancels a queued batch or stops a running one at its next
window."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from app import memory
from app.dispatch import dispatcher, wait_if_asked
from app.errors import ApiError
from app.payloads import batch_request
from app.schemas import PageSchema
from laya_common.contract import wire_json

bp = Blueprint("batches", __name__, url_prefix="/v1/batches")


@bp.post("")
def submit():
    argument, items = batch_request()
    model = argument["model"]
    d = dispatcher()
    batch_id = d.submit_batch(argument, items, d.admit(model))
    response = jsonify({"id": batch_id, "status": "queued"})
    response.call_on_close(memory.give_back)  # once this request's objects are freed
    return response, 202, {"Location": f"/v1/batches/{batch_id}", "x-laya-model": model}


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


@bp.delete("/<batch_id>")
def cancel(batch_id: str):
    """Progress of the cancelled batch (what it stored stays readable). :raise 404: unknown id. :raise 409: done."""
    d = dispatcher()
    d.cancel(batch_id, "batch")
    body, _ = d.batch(batch_id, offset=0, limit=current_app.config["BATCH_PAGE_SIZE"])
    return jsonify(body)


def page_response(body: dict, results: list[bytes]) -> Response:
    """The page as every body is written (`contract.wire_json`), "results" after "offset", each result spliced in
    as the worker stored it, in the same form: parsing and writing again a page of 1,000 results took ~17 ms."""
    head = wire_json({**body, "results": []})  # keys are fixed names: the first '"results": []' is the key's
    text = head.replace('"results": []', '"results": [' + ", ".join(r.decode() for r in results) + "]", 1)
    return current_app.response_class(text + "\n", mimetype="application/json")
