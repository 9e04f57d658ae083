"""GitLab: ``X-Gitlab-Token`` carries the webhook's secret token itself (no MAC, no timestamp);
compared in constant time with each secret."""

from __future__ import annotations

import hmac
from typing import Final

from hookbay_common.models import WebhookVerification
from hookbay_ingest.verification._engine import ACCEPTED, BAD, MISSING, header
from hookbay_ingest.verification.base import Clock, SignedRequest, SigningSecrets, Verification

TOKEN_HEADER: Final = "x-gitlab-token"  # noqa: S105 - a header name / public prefix


class GitLabVerifier:
    def __init__(self, config: WebhookVerification | None = None) -> None:
        pass

    def verify(self, request: SignedRequest, secrets: SigningSecrets, clock: Clock) -> Verification:
        return token_verdict(header(request, TOKEN_HEADER), secrets)


def token_verdict(presented: str | None, secrets: SigningSecrets) -> Verification:
    """``presented`` equal to one of ``secrets`` (constant time, current first)."""
    if presented is None:
        return MISSING
    token = presented.encode("latin-1")  # the header's bytes as sent (captured as latin-1)
    for key, slot in secrets.keys:
        if hmac.compare_digest(key, token):
            return ACCEPTED[slot]
    return BAD
