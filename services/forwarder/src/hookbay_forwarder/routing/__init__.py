"""Routing on the forwarder's side: ``view``, the webhooks that have routes, every destination
and every transformation, in memory, kept current by the configuration change log."""

from hookbay_forwarder.routing.view import RoutingView, RoutingViewUnavailable

__all__ = ["RoutingView", "RoutingViewUnavailable"]
