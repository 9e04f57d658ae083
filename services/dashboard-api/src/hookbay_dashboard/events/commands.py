"""``hookbay events list|replay|export`` and ``hookbay tail``: events from the command line."""

from __future__ import annotations

import click


@click.group()
def events() -> None:
    """A webhook's events: list, replay, export."""


@click.command()
def tail() -> None:
    """Follow new events of a webhook live."""
