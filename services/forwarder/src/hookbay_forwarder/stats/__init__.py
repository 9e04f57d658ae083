"""The stats role: live per-webhook delivery stats, computed by faust-streaming.

A subpackage of the forwarder service, not a service package of its own: the stats processor
ships in the same image and starts the same way (``python -m hookbay_forwarder stats``), takes
the same settings (``ForwarderSettings``: Kafka, MongoDB, the topic namespace, its ``stats_*``
knobs), reads the topics the other two roles read, and shares the process entry, the ops
endpoints and the consumer metrics with them. A package of its own would repeat that wiring and
those settings for no boundary worth enforcing; what keeps it separable is that it imports
nothing of the other roles, only the service's shared modules (``settings``, ``metrics``,
``process``), so it can move out the day it needs its own image or release cycle.

One faust app, ``<namespace>.stats`` (also its consumer group), in three steps:

1. **Facts.** Two agents read ``<ns>.events`` (keyed by owner) and ``<ns>.attempts`` (keyed by
   event id). Every record becomes a *fact*: what it adds to its webhook's ``Counts`` (received or
   rejected; an attempt, delivered, failed, retried, a replay, its latency and answer class), at
   which event time (an event's ``created_at``, an attempt's ``started_at``), from which source
   partition and offset. The facts of a batch are sent to ``<ns>.stats.facts`` keyed by webhook
   id, one message per webhook: a repartition, so every fact of one webhook is counted in one
   partition by one worker.
2. **Buckets.** An agent reads the facts and keeps each webhook's minute and hour buckets in a
   faust table whose changelog (``<ns>.stats.buckets-changelog``, compacted) holds the open
   buckets; a restarted or new worker restores them from it. Windows close on event time: each
   facts partition keeps a clock, the newest event time it has seen (Kafka Streams' "stream
   time"); a record whose minute ended more than ``HOOKBAY_STATS_GRACE`` before the clock is late
   — dropped and counted (``hookbay_stats_late_records_total``) — and a bucket that far behind
   is closed: written a last time, then removed from the table. The grace is long (1 hour by
   default) because the clock is shared by every source partition the facts came from: catching
   up on a backlog, faust reads some partitions ahead of others (with a 2-minute grace, 77 % of a
   20,000-event backlog was dropped as late), and right after a rebalance it can hand a
   partition's records over out of order. Judging lateness per source partition instead was
   tried and dropped 224 of 100,000 records of a backlog for that second reason.
3. **Writes.** Every ``HOOKBAY_STATS_FLUSH_INTERVAL`` the changed buckets are written whole to
   MongoDB (``StatsRepository.write``: one ``$set`` per webhook-hour and webhook-day document),
   so a bucket written again changes nothing.

**Exactly the same totals after a crash**, without Kafka transactions: every bucket remembers,
per source partition, the offset of the last record it counted, and a fact at or below it is
skipped. A crash re-reads from the last commit and re-sends facts; the ones already counted are
recognised and skipped, the others counted. This holds because faust flushes the producer (the
facts and the changelog) before it commits offsets, a bucket is only ever changed from its facts
partition (its changelog goes to that partition number, written in order: buckets, then the
clocks), and the clocks move only forward with the facts — so a replay meets the same clocks at
each fact and drops exactly the facts the first pass dropped.

**Nothing lost in between**: faust-streaming 0.15.3 can lose a record at a seek and then commit
past it (``InOrder`` says how). ``InOrder`` hands both agents their records in offset order,
each once; a record missing is read again from where it went missing (counted in
``hookbay_stats_reseeks_total``), and commits never pass a record not handed over.

Modules: ``counting`` (no I/O: what a record adds to which bucket, and the table's buckets and
clocks), ``ordering`` (``InOrder``, the faust-streaming 0.15.3 workaround), ``metrics``, and
``app`` (the faust app, its agents and the flush to MongoDB: the ``StatsProcessor`` process).
"""

from hookbay_forwarder.stats.app import StatsProcessor

__all__ = ["StatsProcessor"]
