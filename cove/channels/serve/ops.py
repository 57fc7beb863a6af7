"""The operations endpoints: ``/healthz``, ``/readyz`` and ``/metrics``.

They carry no user content, so they are the public paths of the service's guard: a load
balancer or Prometheus reaches them without a session. ``/readyz`` tells an anonymous caller
its verdict and the names of the checks that failed; the checks' details (the database's path,
the worker's identity and confinement, the model endpoint's address) go to logged-in callers
(the session cookie or ``Authorization: Bearer <token>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cove.channels.serve.metrics import ServeMetrics
from cove.channels.web.security import authenticated
from cove.conversation.service.operations import Readiness


@dataclass
class OpsState:
    """What the endpoints read: the metrics, the readiness checks and the stopping flag."""

    metrics: ServeMetrics
    readiness: Readiness
    channels: tuple[str, ...] = ()
    draining: bool = field(default=False)


def _state(request: Request) -> OpsState:
    state: OpsState = request.app.state.ops
    return state


async def healthz(request: Request) -> Response:
    """200 while the process and its event loop run."""
    return JSONResponse({"status": "ok", "channels": list(_state(request).channels)})


async def readyz(request: Request) -> Response:
    """200 when turns can be taken now; 503 while stopping or when a check fails (naming the
    failing checks: ``{"status": "not ready", "failing": ["database"]}``).

    The checks' details only to a logged-in caller: they name the database's path, the worker's
    uid and confinement, the model's base URL.
    """
    state = _state(request)
    if state.draining:
        return JSONResponse({"status": "stopping"}, status_code=503)
    report = await state.readiness.check()
    body: dict[str, Any] = {"status": "ready" if report.ok else "not ready"}
    if not report.ok:
        body["failing"] = list(report.failing)  # the checks' names only, never their details
    if authenticated(request.scope):
        body["checked_at"] = report.checked_at
        body["checks"] = [
            {"name": check.name, "ok": check.ok, "detail": check.detail} for check in report.checks
        ]
    return JSONResponse(body, status_code=200 if report.ok else 503)


async def metrics(request: Request) -> Response:
    """The Prometheus text exposition."""
    return Response(_state(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


#: Served without a login (see the module docstring).
PUBLIC = ("/healthz", "/readyz", "/metrics")

ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
