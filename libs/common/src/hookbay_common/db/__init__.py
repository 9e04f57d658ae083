"""MongoDB access: the client, the index migration and one repository per collection.

Every query hookbay runs lives in a repository here. Queries stay inside what both MongoDB and
FerretDB support: no transactions, change streams, TTL indexes, ``$facet`` or ``$lookup``.
"""

from hookbay_common.db.alert_channels import AlertChannelRepository
from hookbay_common.db.client import Collections, Database, connect, database, migrate
from hookbay_common.db.destination_failures import DestinationFailureRepository, FailedAttempt
from hookbay_common.db.destinations import DestinationRepository
from hookbay_common.db.events import AttemptRepository, EventCursor, EventRepository
from hookbay_common.db.held import HeldTask, HoldRepository, HoldState, HoldStoreError
from hookbay_common.db.issues import IssueRepository
from hookbay_common.db.locks import Lease, LockRepository
from hookbay_common.db.replays import ReplayJob, ReplayJobRepository, ReplayJobStatus
from hookbay_common.db.sessions import SessionRepository
from hookbay_common.db.stats import StatsRepository
from hookbay_common.db.tokens import TokenRepository
from hookbay_common.db.transformations import TransformationRepository
from hookbay_common.db.users import UserRepository
from hookbay_common.db.webhooks import WebhookRepository

__all__ = [
    "AlertChannelRepository",
    "AttemptRepository",
    "Collections",
    "Database",
    "DestinationFailureRepository",
    "DestinationRepository",
    "EventCursor",
    "EventRepository",
    "FailedAttempt",
    "HeldTask",
    "HoldRepository",
    "HoldState",
    "HoldStoreError",
    "IssueRepository",
    "Lease",
    "LockRepository",
    "ReplayJob",
    "ReplayJobRepository",
    "ReplayJobStatus",
    "SessionRepository",
    "StatsRepository",
    "TokenRepository",
    "TransformationRepository",
    "UserRepository",
    "WebhookRepository",
    "connect",
    "database",
    "migrate",
]
