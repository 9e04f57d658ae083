"""The forwarder role: delivering events to their destinations.

``consumer`` is the consume loop (ordered per key, commits after the work), ``handlers`` the
business (an event or a task in, an attempt and what follows out), ``deliverer`` the HTTP
attempt, ``retry`` the retry schedule and its delay tiers, ``deadletter`` the dead-letter limit,
and ``app`` wires them into the ``Forwarder`` process.
"""

from hookbay_forwarder.delivery.app import Forwarder

__all__ = ["Forwarder"]
