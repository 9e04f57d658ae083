"""``python -m hookbay_dashboard``: serve the dashboard API with uvicorn (uvloop + httptools).

The HTTP protocol is ``hookbay_dashboard.server``'s (uvicorn's httptools one answering malformed
requests in hookbay's JSON error shape); no protocol upgrade is ever performed (``ws="none"``).

SIGTERM: uvicorn stops accepting, lets in-flight requests finish (live tails end), then the
lifespan closes the Kafka producer and the database client.
"""

from __future__ import annotations

import sys

import uvicorn
from pydantic import ValidationError

from hookbay_common.errors import HookbayError
from hookbay_common.logs import InvalidLogFormat, configure_logging
from hookbay_dashboard.app import create_app
from hookbay_dashboard.server import DashboardHttpProtocol
from hookbay_dashboard.settings import DashboardSettings


def main() -> None:
    try:
        settings = DashboardSettings()  # type: ignore[call-arg]
        configure_logging(settings.log_level, service="dashboard-api")
        app = create_app(settings)
    except (ValidationError, InvalidLogFormat, HookbayError) as exc:
        print(f"hookbay-dashboard: invalid configuration: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(2)
    uvicorn.run(
        app,
        host=settings.dashboard_host,
        port=settings.dashboard_port,
        loop="uvloop",
        http=DashboardHttpProtocol,
        ws="none",
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=10,
        timeout_keep_alive=int(settings.keepalive_timeout),
        # a request's address (the login limiter's key) from X-Forwarded-For only when the peer
        # is one of HOOKBAY_TRUSTED_PROXIES; uvicorn's default believes any loopback peer
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=[str(network) for network in settings.trusted_proxies],
    )


if __name__ == "__main__":
    main()
