"""Which served model answers a request (laya-serve's resolution, `contract.resolve_model`), and which are warm."""

from __future__ import annotations

from flask import current_app

from app.errors import ApiError
from laya_common import contract


def served_models(settings: dict) -> tuple[str, ...]:
    """LAYA_MODELS as canonical names, the default first. ValueError naming the variable for a non-Laya name."""
    return contract.parse_models(settings["MODELS"], "LAYA_MODELS")


def resolved_model(model_id: object) -> str:
    """The served model a request's `model` field resolves to. :raise 422: a Laya model not served here."""
    try:
        return contract.resolve_model(model_id, current_app.config["SERVED_MODELS"])
    except contract.RequestError as e:
        raise ApiError("validation", e.detail, field=e.field) from None


def ready_workers(workers: list[dict], served: tuple[str, ...]) -> dict[str, int]:
    """Served model -> how many of its workers are warm (what /health reports, and /info may)."""
    return {model: sum(w["state"] == "ready" and w["model"] == model for w in workers) for model in served}


def resolution_table() -> str:
    """The resolution rules in words, for /openapi.json."""
    aliases = "; ".join(
        f"{model}: {', '.join(k for k, v in contract.MODEL_ALIASES.items() if v == model)}" for model in contract.MODELS
    )
    return (
        f"A Laya model ({', '.join(contract.MODELS)}) or an alias of one, case and surrounding spaces ignored "
        f'({aliases}). Any other id (a Jev client\'s own, such as "jev-1", or convaiinnovations/laya), an '
        "empty one or none goes to the default model, the first of LAYA_MODELS. A Laya model this service "
        "does not serve is a 422. The response header x-laya-model names the model that answered."
    )
