"""Routing decisions that are pure functions of an event: the route filter engine
(``filters``). The owner's page is docs/owners/filters.md."""
