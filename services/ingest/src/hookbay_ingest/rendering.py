"""Errors rendered as answers, in the JSON shape every hookbay error has
(``{"error", "message", ...}``, ``hookbay_common.errors.HookbayError.body``).

Pure: rendering neither logs nor counts; the receive pipeline does both before it renders.
"""

from __future__ import annotations

from http import HTTPStatus

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hookbay_common.errors import HookbayError
from hookbay_ingest.errors import MethodNotAllowed, NoSuchPath


def error_response(exc: HookbayError) -> Response:
    """``exc``'s body, status and headers."""
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)


def crash_response(request_id: str) -> Response:
    """The 500 for a bug: the request id to quote, nothing of the exception."""
    return error_response(
        HookbayError("unexpected error; the event was not stored", requestId=request_id)
    )


def disconnect_response() -> Response:
    """For a sender that hung up mid-body: an empty 400 (nobody is left to read it; it is what
    the request is counted as)."""
    return Response(status_code=400)


async def http_error(request: Request, exc: Exception) -> Response:
    """FastAPI's own 404 and 405 (paths other than the receiving route) in the JSON shape of
    every other error, instead of ``{"detail": ...}``."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return error_response(NoSuchPath(request.url.path))
    error = MethodNotAllowed.error if exc.status_code == 405 else HTTPStatus(exc.status_code).phrase
    message = (
        f"{request.method} is not allowed on {request.url.path}"
        if exc.status_code == 405
        else str(exc.detail)
    )
    return JSONResponse(
        {"error": error, "message": message}, status_code=exc.status_code, headers=exc.headers
    )
