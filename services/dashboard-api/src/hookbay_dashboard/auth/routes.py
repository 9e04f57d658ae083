"""``POST /auth/login``, ``POST /auth/logout``, ``GET /me``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from hookbay_dashboard.auth.schemas import LoginRequest, Me
from hookbay_dashboard.deps import SESSION_COOKIE, AuthDep, CurrentUser, SettingsDep

router = APIRouter(tags=["auth"])


@router.post("/auth/login", response_model=Me)
async def login(
    body: LoginRequest, request: Request, response: Response, auth: AuthDep, settings: SettingsDep
) -> Me:
    """Start a dashboard session: sets the HttpOnly, SameSite=Strict session cookie and returns
    the CSRF token to send as ``X-CSRF-Token`` on state-changing requests."""
    address = request.client.host if request.client else "unknown"
    user, login = await auth.login(body.username, body.password, address)
    response.set_cookie(
        SESSION_COOKIE, login.cookie, max_age=int(settings.session_ttl), path="/",
        httponly=True, samesite="strict", secure=settings.cookie_secure,
    )  # fmt: skip
    return Me.of(user, login.session.csrf_token)


@router.post("/auth/logout", status_code=status.HTTP_204_NO_CONTENT)
async def logout(principal: CurrentUser, auth: AuthDep, settings: SettingsDep) -> Response:
    """End the session (the cookie stops working on every replica at once)."""
    if principal.session is not None:
        await auth.logout(principal.session)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=settings.cookie_secure
    )
    return response


@router.get("/me", response_model=Me)
async def me(principal: CurrentUser) -> Me:
    session = principal.session
    return Me.of(principal.user, session.csrf_token if session is not None else None)
