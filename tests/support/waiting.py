"""Waiting for a condition a test brought about (``hookbay_dev.waiting``, shared with the scripts)."""

from hookbay_dev.waiting import until

__all__ = ["until"]
