"""JSON API: a conversation's instructions and model, and the models the endpoint offers."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cove.channels.web.errors import BadInput
from cove.channels.web.state import json_body, web
from cove.conversation import INSTRUCTIONS_CHARS, KEEP, Conversations, Profile


def profile_json(profile: Profile, convs: Conversations) -> dict[str, Any]:
    """A profile as the API shows it, with what a settings panel needs beside it."""
    return {
        "instructions": profile.instructions,
        "model": profile.model,  # None: the configured model
        "from_turn": profile.from_turn,
        "configured_model": convs.settings.model.name,
        "instructions_limit": INSTRUCTIONS_CHARS,
    }


def optional_text(body: dict[str, Any], name: str) -> str | None:
    """A field that is text or null (null: cleared); 422 otherwise."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"field {name!r} must be a string or null")
    return value


async def models(request: Request) -> Response:
    """What the endpoints offer (502 with the endpoint's failure when they cannot list)."""
    convs = web(request).convs
    return JSONResponse({"models": await convs.models(), "configured": convs.settings.model.name})


async def get_profile(request: Request) -> Response:
    convs = web(request).convs
    record = await convs.get(request.path_params["cid"])
    return JSONResponse(profile_json(await convs.profile(record.id), convs))


async def set_profile(request: Request) -> Response:
    """Change the instructions and/or the model (the fields given; null clears one)."""
    body = await json_body(request)
    unknown = set(body) - {"instructions", "model"}
    if unknown:
        raise BadInput(f"unknown field(s): {', '.join(sorted(unknown))}")
    convs = web(request).convs
    profile = await convs.set_profile(
        request.path_params["cid"],
        instructions=optional_text(body, "instructions") if "instructions" in body else KEEP,
        model=(optional_text(body, "model") or None) if "model" in body else KEEP,
    )
    return JSONResponse(profile_json(profile, convs))


ROUTES = [
    Route("/api/models", models, methods=["GET"]),
    Route("/api/conversations/{cid}/profile", get_profile, methods=["GET"]),
    Route("/api/conversations/{cid}/profile", set_profile, methods=["PUT"]),
]
