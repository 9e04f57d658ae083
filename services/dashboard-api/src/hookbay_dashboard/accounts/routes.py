"""``/tokens`` (the caller's own API tokens) and ``/admin/users`` (admin role only)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from hookbay_common.errors import InvalidRequest
from hookbay_dashboard.accounts.schemas import (
    TokenCreate,
    TokenIssued,
    TokenRead,
    UserCreate,
    UserCreated,
    UserRead,
    UserUpdate,
)
from hookbay_dashboard.deps import AccountsDep, AdminUser, CurrentUser

router = APIRouter()


@router.get("/tokens", response_model=list[TokenRead], tags=["tokens"])
async def list_tokens(principal: CurrentUser, accounts: AccountsDep) -> list[TokenRead]:
    """The caller's API tokens (never the tokens themselves)."""
    return [TokenRead.of(t) for t in await accounts.list_tokens(principal.username)]


@router.post(
    "/tokens", response_model=TokenIssued, status_code=status.HTTP_201_CREATED, tags=["tokens"]
)
async def create_token(
    body: TokenCreate, principal: CurrentUser, accounts: AccountsDep
) -> TokenIssued:
    issued = await accounts.create_token(principal.username, name=body.name)
    return TokenIssued(**TokenRead.of(issued.record).model_dump(), token=issued.token)


@router.delete("/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT, tags=["tokens"])
async def revoke_token(token_id: str, principal: CurrentUser, accounts: AccountsDep) -> Response:
    """Revoke one of the caller's tokens; it stops working at once."""
    await accounts.revoke_token(principal.username, token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/admin/users", response_model=list[UserRead], tags=["admin"])
async def list_users(_: AdminUser, accounts: AccountsDep) -> list[UserRead]:
    return [UserRead.of(u) for u in await accounts.list_users()]


@router.post(
    "/admin/users", response_model=UserCreated, status_code=status.HTTP_201_CREATED,
    tags=["admin"],
)  # fmt: skip
async def create_user(body: UserCreate, _: AdminUser, accounts: AccountsDep) -> UserCreated:
    """Create a user; the answer carries its first API token, shown once."""
    user, issued = await accounts.create_user(
        body.username, plan=body.plan, admin=body.role == "admin", password=body.password
    )
    return UserCreated(**UserRead.of(user).model_dump(), token=issued.token)


@router.patch("/admin/users/{username}", response_model=UserRead, tags=["admin"])
async def update_user(
    username: str, body: UserUpdate, _: AdminUser, accounts: AccountsDep
) -> UserRead:
    """Change a user's plan (live on every ingest replica once the change log delivers it),
    role or password (which ends the user's dashboard sessions)."""
    user = await accounts.update_user(
        username, plan=body.plan, role=body.role, password=body.password
    )
    return UserRead.of(user)


@router.delete("/admin/users/{username}", status_code=status.HTTP_204_NO_CONTENT, tags=["admin"])
async def delete_user(username: str, admin: AdminUser, accounts: AccountsDep) -> Response:
    """Delete a user and everything of theirs (webhooks, tokens, sessions, stats, events,
    attempts).
    Ingest answers 403 ``User not found`` for the owner once the change log delivers it. An admin
    cannot delete their own account (400)."""
    if username == admin.user.username:
        raise InvalidRequest("you cannot delete your own account")
    await accounts.delete_user(username)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
