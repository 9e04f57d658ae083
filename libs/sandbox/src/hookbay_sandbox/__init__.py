"""The transformation sandbox: owners' JavaScript (Hookdeck's ``addHandler('transform', …)``
contract) run in worker subprocesses under CPU, memory, stack and output limits, a fresh
context per call. ``TransformPool`` runs calls; ``check_transformation`` checks code at save
time. The owner's page is docs/owners/transformations.md; the engine choice and the fairness
policy are in docs/decisions.md."""

from hookbay_sandbox.check import check_transformation
from hookbay_sandbox.limits import CODE_MAX_BYTES, REQUEST_MAX_BYTES, Limits
from hookbay_sandbox.model import (
    ErrorKind,
    TransformError,
    TransformRequest,
    TransformResult,
)
from hookbay_sandbox.pool import PoolClosed, TransformPool
from hookbay_sandbox.received import ReceivedEvent, request_of_event

__all__ = [
    "CODE_MAX_BYTES",
    "REQUEST_MAX_BYTES",
    "ErrorKind",
    "Limits",
    "PoolClosed",
    "ReceivedEvent",
    "TransformError",
    "TransformPool",
    "TransformRequest",
    "TransformResult",
    "check_transformation",
    "request_of_event",
]
