"""Owner alerts: issues (``issues``: one record per problem, its lifecycle and when to tell
the owner) and alert channels (``notifier``: one notification per transition to every channel
of the owner's, in the background, retried; ``senders``: the webhook, Slack, PagerDuty and
email shapes; ``signing``: Standard Webhooks signatures). docs/owners/alerts.md."""

from hookbay_common.alerts.issues import IssueTracker
from hookbay_common.alerts.messages import Notification, issue_view
from hookbay_common.alerts.notifier import AlertMetrics, Notifier, create_notifier
from hookbay_common.alerts.senders import ChannelError, Senders, SmtpSettings
from hookbay_common.alerts.signing import check_secret, new_secret, sign

__all__ = [
    "AlertMetrics",
    "ChannelError",
    "IssueTracker",
    "Notification",
    "Notifier",
    "Senders",
    "SmtpSettings",
    "check_secret",
    "create_notifier",
    "issue_view",
    "new_secret",
    "sign",
]
