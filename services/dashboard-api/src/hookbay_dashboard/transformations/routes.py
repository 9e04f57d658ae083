"""``/transformations``: the caller's transformations. Another owner's transformation answers
404 like a missing one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from hookbay_dashboard.deps import CurrentUser, TransformationsDep
from hookbay_dashboard.transformations.schemas import (
    TransformationCreate,
    TransformationRead,
    TransformationTest,
    TransformationTestResult,
    TransformationUpdate,
)

router = APIRouter(tags=["transformations"])

_TOO_LARGE: dict[int | str, dict[str, Any]] = {
    413: {
        "description": "code, env or the test request over its size limit (detail names it)",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "error": {"type": "string"},
                        "message": {"type": "string"},
                        "detail": {"type": "array", "items": {"type": "object"}},
                    },
                    "required": ["error", "message"],
                }
            }
        },
    }
}


@router.get("/transformations", response_model=list[TransformationRead])
async def list_transformations(
    principal: CurrentUser, transformations: TransformationsDep
) -> list[TransformationRead]:
    found = await transformations.list_for_owner(principal.username)
    return [TransformationRead.of(t) for t in found]


@router.post(
    "/transformations",
    response_model=TransformationRead,
    status_code=status.HTTP_201_CREATED,
    responses=_TOO_LARGE,
)
async def create_transformation(
    body: TransformationCreate, principal: CurrentUser, transformations: TransformationsDep
) -> TransformationRead:
    """Create a transformation (``version`` 1). Its code is checked first: a syntax error, a
    top level that throws or spins, or no ``transform`` handler is a 422 naming ``code``
    (with ``line`` and ``column`` when known); code or env over its size limit is a 413."""
    return TransformationRead.of(await transformations.create(principal.username, body))


@router.get("/transformations/{trf}", response_model=TransformationRead)
async def get_transformation(
    trf: str, principal: CurrentUser, transformations: TransformationsDep
) -> TransformationRead:
    return TransformationRead.of(await transformations.get(principal.username, trf))


@router.patch("/transformations/{trf}", response_model=TransformationRead, responses=_TOO_LARGE)
async def update_transformation(
    trf: str, body: TransformationUpdate, principal: CurrentUser,
    transformations: TransformationsDep,
) -> TransformationRead:  # fmt: skip
    """Change the fields sent (code checked as on creation); ``version`` moves up by one when
    the code or the env changes. ``env`` replaces the stored map (a value sent as
    ``"********"`` keeps the stored value of that name)."""
    return TransformationRead.of(await transformations.change(principal.username, trf, body))


@router.delete("/transformations/{trf}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_transformation(
    trf: str, principal: CurrentUser, transformations: TransformationsDep
) -> Response:
    """409 naming the routes (``webhook/route``) that still run it."""
    await transformations.delete(principal.username, trf)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/transformations/{trf}/test", response_model=TransformationTestResult, responses=_TOO_LARGE
)
async def test_transformation(
    trf: str, body: TransformationTest, principal: CurrentUser,
    transformations: TransformationsDep,
) -> TransformationTestResult:  # fmt: skip
    """Run the saved code with its env on one of your events (``event_id``) or on a
    ``request``, in the sandbox with the default limits (1 s CPU, 32 MiB). The code failing
    is a 200 with ``error`` (its kind, message, line and column) and the logs so far."""
    result = await transformations.test(principal.username, trf, body)
    return TransformationTestResult.of(result)
