"""Retention tests run on a database of their own (see ``tests.support.retention``)."""

from tests.support.retention import (  # noqa: F401  (fixtures)
    pushgateway,
    rdb,
    retention_db_session,
    retention_env,
    retention_url,
)
