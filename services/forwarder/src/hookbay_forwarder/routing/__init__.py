"""Routing on the forwarder's side: ``view``, the webhooks that have routes and every
destination, in memory, kept current by the configuration change log."""

from hookbay_forwarder.routing.view import RoutingView, RoutingViewUnavailable

__all__ = ["RoutingView", "RoutingViewUnavailable"]
