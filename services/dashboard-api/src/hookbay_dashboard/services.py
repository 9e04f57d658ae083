"""The dashboard's services, built in one place for the HTTP app (``deps``) and the ``hookbay``
commands (``commands``, ``events.commands``): the same repositories, settings and change-log
publisher give the same service, whichever of the two asks for it."""

from __future__ import annotations

from dataclasses import dataclass

from argon2 import PasswordHasher
from prometheus_client import CollectorRegistry

from hookbay_common.alerts import IssueTracker, Notifier
from hookbay_common.configlog import ConfigPublisher
from hookbay_common.db import (
    AlertChannelRepository,
    AttemptRepository,
    DestinationFailureRepository,
    DestinationRepository,
    EventRepository,
    HoldRepository,
    IssueRepository,
    ReplayJobRepository,
    SessionRepository,
    StatsRepository,
    TokenRepository,
    TransformationRepository,
    UserRepository,
    WebhookRepository,
)
from hookbay_common.db.client import Database
from hookbay_common.plans import PlanBook
from hookbay_common.ratelimit import RateLimiter
from hookbay_common.secrets_box import SecretBox
from hookbay_common.settings import Settings
from hookbay_dashboard.accounts.service import AccountService, OwnerData
from hookbay_dashboard.alerts.service import AlertChannelService
from hookbay_dashboard.auth.service import AuthService
from hookbay_dashboard.deliveries.service import DeliveryService
from hookbay_dashboard.destinations.service import DestinationService
from hookbay_dashboard.events.cursor import cursor_key
from hookbay_dashboard.events.service import EventService
from hookbay_dashboard.issues.service import IssueService
from hookbay_dashboard.replays.service import ReplayJobRunner, ReplayPublisher, ReplayService
from hookbay_dashboard.routing.service import RouteService
from hookbay_dashboard.settings import DashboardSettings
from hookbay_dashboard.stats.service import StatsService
from hookbay_dashboard.tail.service import TailService
from hookbay_dashboard.transformations.sandbox import Sandbox
from hookbay_dashboard.transformations.service import TransformationService
from hookbay_dashboard.webhooks.service import WebhookService


@dataclass(frozen=True)
class Stores:
    """The repositories the dashboard's services work on, over one database."""

    users: UserRepository
    tokens: TokenRepository
    sessions: SessionRepository
    webhooks: WebhookRepository
    events: EventRepository
    attempts: AttemptRepository
    stats: StatsRepository
    replay_jobs: ReplayJobRepository
    destinations: DestinationRepository
    issues: IssueRepository
    alert_channels: AlertChannelRepository
    transformations: TransformationRepository
    holds: HoldRepository
    destination_failures: DestinationFailureRepository

    @classmethod
    def open(cls, db: Database, box: SecretBox) -> Stores:
        return cls(
            UserRepository(db), TokenRepository(db), SessionRepository(db),
            WebhookRepository(db, box), EventRepository(db), AttemptRepository(db),
            StatsRepository(db), ReplayJobRepository(db), DestinationRepository(db, box),
            IssueRepository(db), AlertChannelRepository(db, box),
            TransformationRepository(db, box), HoldRepository(db),
            DestinationFailureRepository(db),
        )  # fmt: skip


class Services:
    """Builds each owner-facing service from ``stores``. ``config`` publishes user and webhook
    changes to the configuration change log (``hookbay_common.configlog``); ``settings`` are the
    base settings both the API and the commands read (the secret key, private destinations);
    ``notifier`` tells the owners' alert channels of their issues (``None``: nobody is told,
    and channels cannot be tested)."""

    def __init__(
        self, stores: Stores, settings: Settings, plans: PlanBook, *, config: ConfigPublisher,
        notifier: Notifier | None = None,
    ) -> None:  # fmt: skip
        self.stores = stores
        self.settings = settings
        self.plans = plans
        self.config = config
        self.notifier = notifier

    def accounts(self, *, hasher: PasswordHasher | None = None) -> AccountService:
        s = self.stores
        owner_data = OwnerData(
            s.webhooks,
            s.events,
            s.attempts,
            s.sessions,
            s.stats,
            s.destinations,
            s.issues,
            s.alert_channels,
            s.transformations,
        )
        return AccountService(
            s.users, s.tokens, self.plans, hasher=hasher, sessions=s.sessions,
            publisher=self.config, owner_data=owner_data,
        )  # fmt: skip

    def auth(self, limiter: RateLimiter, settings: DashboardSettings) -> AuthService:
        """The API's sign-in (the commands have no sessions): ``limiter`` throttles logins."""
        s = self.stores
        return AuthService(
            s.users, s.tokens, s.sessions, limiter, session_ttl=settings.session_ttl,
            limit_per_user=settings.login_limit_per_user,
            limit_per_address=settings.login_limit_per_address,
        )  # fmt: skip

    def webhooks(self) -> WebhookService:
        s = self.stores
        return WebhookService(
            s.webhooks, s.users, s.destinations,
            allow_private=self.settings.allow_private_destinations, publisher=self.config,
            stats=s.stats,
        )  # fmt: skip

    def destinations(self) -> DestinationService:
        s = self.stores
        return DestinationService(
            s.destinations, s.users, s.webhooks,
            allow_private=self.settings.allow_private_destinations, publisher=self.config,
            holds=s.holds, failures=s.destination_failures,
        )  # fmt: skip

    def transformations(self, sandbox: Sandbox) -> TransformationService:
        """``sandbox``: the process's (the API's ``Runtime.sandbox``), which checks code when it
        is saved and runs test calls."""
        s = self.stores
        return TransformationService(
            s.transformations, s.users, s.events, s.webhooks, sandbox, publisher=self.config
        )

    def issue_tracker(self) -> IssueTracker:
        return IssueTracker(self.stores.issues, self.notifier)

    def issues(self) -> IssueService:
        return IssueService(self.stores.issues, self.issue_tracker())

    def alert_channels(self) -> AlertChannelService:
        if self.notifier is None:
            raise RuntimeError("alert channels need a notifier")
        s = self.stores
        return AlertChannelService(
            s.alert_channels, s.users, self.notifier,
            allow_private=self.settings.allow_private_destinations,
            email_enabled=self.settings.smtp_url is not None,
        )  # fmt: skip

    def routes(self, sandbox: Sandbox | None = None) -> RouteService:
        """``sandbox``: the process's, which runs a dry run's transformation (none: the dry run
        shows verdicts only)."""
        s = self.stores
        return RouteService(
            s.webhooks, s.destinations, s.events, s.transformations, publisher=self.config,
            sandbox=sandbox,
        )  # fmt: skip

    def events(self) -> EventService:
        s = self.stores
        return EventService(
            s.events, s.attempts, s.webhooks,
            cursor_key=cursor_key(self.settings.secret_key.get_secret_value()), stats=s.stats,
        )  # fmt: skip

    def replays(
        self, publisher: ReplayPublisher, *, runner: ReplayJobRunner | None = None
    ) -> ReplayService:
        """``runner``: the replica's bulk-replay runner (the API's); without one, bulk replays
        wait for a replica's runner to adopt them."""
        s = self.stores
        return ReplayService(s.events, s.webhooks, s.replay_jobs, publisher, runner=runner)

    def deliveries(self, publisher: ReplayPublisher) -> DeliveryService:
        s = self.stores
        return DeliveryService(s.events, s.destinations, s.webhooks, publisher)

    def stats(self) -> StatsService:
        return StatsService(self.stores.webhooks, self.stores.stats)

    def tails(
        self,
        *,
        poll_interval: float,
        heartbeat: float = 15.0,
        registry: CollectorRegistry | None = None,
    ) -> TailService:
        """A live-tail feed source: the API builds one per replica, shared by every open tail."""
        return TailService(
            self.stores.webhooks, self.stores.events, poll_interval=poll_interval,
            heartbeat=heartbeat, registry=registry,
        )  # fmt: skip
