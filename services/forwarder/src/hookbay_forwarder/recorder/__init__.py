"""The recorder role: events and attempts from Kafka into MongoDB.

``consumer`` is the batch loop (write, then commit), ``handlers`` the write of one batch, and
``app`` wires them into the ``Recorder`` process.
"""

from hookbay_forwarder.recorder.app import Recorder

__all__ = ["Recorder"]
