"""Typed dependencies of the routes: the runtime, the caller, and the services (built by
``hookbay_dashboard.services``, as the ``hookbay-admin`` commands build theirs).

Authentication: an ``Authorization: Bearer <API token>`` header, or the ``hookbay_session``
cookie set by ``POST /auth/login``. With the cookie, every state-changing request must also
send the session's CSRF token as ``X-CSRF-Token`` (SameSite=Strict already keeps other sites'
requests from carrying the cookie; the header is the second lock).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from hookbay_common.errors import AdminRequired, CsrfRejected, NotAuthenticated
from hookbay_common.names import check_storable
from hookbay_dashboard.accounts.service import AccountService
from hookbay_dashboard.alerts.service import AlertChannelService
from hookbay_dashboard.auth.service import AuthService, Principal
from hookbay_dashboard.deliveries.service import DeliveryService
from hookbay_dashboard.destinations.service import DestinationService
from hookbay_dashboard.events.service import EventService
from hookbay_dashboard.issues.service import IssueService
from hookbay_dashboard.replays.service import ReplayService
from hookbay_dashboard.routing.service import RouteService
from hookbay_dashboard.runtime import Runtime
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dashboard.stats.service import StatsService
from hookbay_dashboard.tail.service import TailService
from hookbay_dashboard.transformations.service import TransformationService
from hookbay_dashboard.webhooks.service import WebhookService

SESSION_COOKIE = "hookbay_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_bearer = HTTPBearer(auto_error=False, description="A personal API token (hbk_...).")
_cookie = APIKeyCookie(
    name=SESSION_COOKIE, auto_error=False, description="Set by POST /auth/login."
)


async def refuse_unstorable_text(request: Request) -> None:
    """Every route's first dependency: each path and query parameter and each string of a JSON
    body (keys too) must be text the store can take (``hookbay_common.names.check_storable``:
    no NUL, no unpaired surrogate), else 400 before anything reaches MongoDB, Redis or a
    password hash. One check for every parameter, present and future, instead of one per field.
    Runs after FastAPI parsed the body (a body that is not JSON is left to its 422)."""
    for name, value in request.path_params.items():
        check_storable(value, f"path parameter {name}")
    for name, value in request.query_params.multi_items():
        check_storable(name, "a query parameter name")
        check_storable(value, f"query parameter {name}")
    if await request.body():
        try:
            body = await request.json()  # parsed once: Starlette keeps FastAPI's result
        except ValueError:
            return
        _check_json(body, "body")


def _check_json(value: Any, where: str) -> None:
    if isinstance(value, str):
        check_storable(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(key, f"a key of {where}")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_settings(runtime: RuntimeDep) -> DashboardSettings:
    return runtime.settings


SettingsDep = Annotated[DashboardSettings, Depends(get_settings)]


def get_auth(runtime: RuntimeDep) -> AuthService:
    return runtime.services.auth(runtime.limiter, runtime.settings)


AuthDep = Annotated[AuthService, Depends(get_auth)]


async def current_principal(
    request: Request,
    auth: AuthDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    cookie: Annotated[str | None, Depends(_cookie)],
) -> Principal:
    """The caller; a bearer token wins over a cookie when both are sent."""
    if bearer is not None:
        return await auth.from_token(bearer.credentials)
    if cookie:
        principal = await auth.from_cookie(cookie)
        assert principal.session is not None
        if request.method not in SAFE_METHODS and not auth.csrf_ok(
            principal.session, request.headers.get(CSRF_HEADER)
        ):
            raise CsrfRejected()
        return principal
    raise NotAuthenticated()


CurrentUser = Annotated[Principal, Depends(current_principal)]


def require_admin(principal: CurrentUser) -> Principal:
    if not principal.user.is_admin:
        raise AdminRequired()
    return principal


AdminUser = Annotated[Principal, Depends(require_admin)]


def get_accounts(runtime: RuntimeDep) -> AccountService:
    return runtime.services.accounts()


AccountsDep = Annotated[AccountService, Depends(get_accounts)]


def get_webhooks(runtime: RuntimeDep) -> WebhookService:
    return runtime.services.webhooks()


WebhooksDep = Annotated[WebhookService, Depends(get_webhooks)]


def get_tail(runtime: RuntimeDep) -> TailService:
    return runtime.tails


TailDep = Annotated[TailService, Depends(get_tail)]


def get_events(runtime: RuntimeDep) -> EventService:
    return runtime.services.events()


EventsDep = Annotated[EventService, Depends(get_events)]


def get_replays(runtime: RuntimeDep) -> ReplayService:
    runner = runtime.replay_runner
    return runtime.services.replays(runner.publisher, runner=runner)


ReplaysDep = Annotated[ReplayService, Depends(get_replays)]


def get_deliveries(runtime: RuntimeDep) -> DeliveryService:
    return runtime.services.deliveries(runtime.replay_runner.publisher)


DeliveriesDep = Annotated[DeliveryService, Depends(get_deliveries)]


def get_stats(runtime: RuntimeDep) -> StatsService:
    return runtime.services.stats()


StatsDep = Annotated[StatsService, Depends(get_stats)]


def get_destinations(runtime: RuntimeDep) -> DestinationService:
    return runtime.services.destinations()


DestinationsDep = Annotated[DestinationService, Depends(get_destinations)]


def get_transformations(runtime: RuntimeDep) -> TransformationService:
    return runtime.services.transformations(runtime.sandbox)


TransformationsDep = Annotated[TransformationService, Depends(get_transformations)]


def get_routes(runtime: RuntimeDep) -> RouteService:
    return runtime.services.routes(runtime.sandbox)


RoutesDep = Annotated[RouteService, Depends(get_routes)]


def get_issues(runtime: RuntimeDep) -> IssueService:
    return runtime.services.issues()


IssuesDep = Annotated[IssueService, Depends(get_issues)]


def get_alert_channels(runtime: RuntimeDep) -> AlertChannelService:
    return runtime.services.alert_channels()


AlertChannelsDep = Annotated[AlertChannelService, Depends(get_alert_channels)]
