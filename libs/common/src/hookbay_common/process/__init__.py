"""The process runtime every hookbay service shares.

- Probes (``probes``): ``/healthz``, ``/readyz`` and ``/metrics`` from a checks function, a
  healthy function and a Prometheus registry; a standalone ops app for the consumer processes,
  or routes mounted into a service's own app.
- Graceful stop (``stop``): signal handlers that request a stop, and a uvicorn server that
  leaves signals to the process hosting it (an ops app inside a consumer process's loop) or
  drains before its graceful shutdown (ingest behind a load balancer).
- The start-up heap (``heap``): ``settle`` once started, so the garbage collector no longer
  walks what start-up made.
- Loop errors (``loop``): what the event loop reports on its own (an exception no task
  retrieved) becomes one JSON line naming the failure, never a traceback.
"""

from hookbay_common.process import heap
from hookbay_common.process.loop import report_loop_errors
from hookbay_common.process.probes import Checks, Probes, create_ops_app, mount_probes, probe_routes
from hookbay_common.process.stop import (
    DrainingServer,
    OpsServer,
    create_ops_server,
    serving,
    stop_on_signals,
)

__all__ = [
    "Checks",
    "DrainingServer",
    "OpsServer",
    "Probes",
    "create_ops_app",
    "create_ops_server",
    "heap",
    "mount_probes",
    "probe_routes",
    "report_loop_errors",
    "serving",
    "stop_on_signals",
]
