import { useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { overviewQuery } from "../api/queries";
import type { WebhookOverview } from "../api/types";
import { Empty, ErrorText, Loading, Sparkline, StatusBadge, Time } from "../components/ui";
import { ago, percent } from "../lib/format";

type Figure = {
  label: string;
  value: (hook: WebhookOverview) => number;
  status?: "success" | "failed" | "pending";
  says: string;
};
// Received, delivered, failed and rejected are the stats' counters; pending is counted from
// the stored events (the stats count deliveries when they end, not the events still waiting).
const FIGURES: Figure[] = [
  { label: "Received", value: (h) => h.stats_24h.received, says: "events received" },
  {
    label: "Delivered",
    value: (h) => h.stats_24h.delivered,
    status: "success",
    says: "deliveries succeeded",
  },
  {
    label: "Failed",
    value: (h) => h.stats_24h.failed,
    status: "failed",
    says: "deliveries failed",
  },
  {
    label: "Rejected",
    value: (h) => h.stats_24h.rejected,
    status: "failed",
    says: "events rejected (signature)",
  },
  { label: "Pending", value: (h) => h.pending_24h, status: "pending", says: "events pending" },
];

export function Overview() {
  const { data, error, isPending } = useQuery(overviewQuery);
  if (isPending) return <Loading what="the overview" />;
  if (error) return <ErrorText error={error} />;
  const since = data.stats_since;
  return (
    <div className="space-y-8">
      <h1 className="text-2xl font-semibold">Overview</h1>
      <section aria-labelledby="hooks-title">
        <h2 id="hooks-title" className="mb-2 text-lg font-semibold">
          Webhooks, last 24 hours
        </h2>
        {data.webhooks.length === 0 ? (
          <Empty>
            No webhooks yet. <Link to="/webhooks">Create one</Link>.
          </Empty>
        ) : (
          <ul className="grid gap-3 md:grid-cols-2 xl:grid-cols-3">
            {data.webhooks.map((hook) => (
              <li key={hook.name} className="rounded-lg border border-line bg-panel p-4">
                <div className="mb-2 flex items-center gap-2">
                  <h3 className="font-semibold">
                    <Link to="/webhooks/$name/events" params={{ name: hook.name }}>
                      {hook.name}
                    </Link>
                  </h3>
                  <span className="rounded border border-line px-1.5 text-xs">
                    {hook.active ? "Active" : "Inactive"}
                  </span>
                </div>
                <dl className="grid grid-cols-5 gap-2 text-sm">
                  {FIGURES.map((figure) => (
                    <div key={figure.label}>
                      <dt className="text-muted">{figure.label}</dt>
                      <dd>
                        <Link
                          to="/webhooks/$name/events"
                          params={{ name: hook.name }}
                          search={{ status: figure.status, since }}
                          aria-label={`${figure.value(hook)} ${figure.says} for ${hook.name} in the last 24 hours`}
                        >
                          {figure.value(hook)}
                        </Link>
                      </dd>
                    </div>
                  ))}
                </dl>
                <div className="mt-2">
                  <Sparkline
                    points={hook.hourly_24h}
                    label={`${hook.name}, last 24 hours`}
                    unit="hour"
                  />
                </div>
                <p className="mt-1 text-sm text-muted">
                  Success rate {percent(hook.success_rate_24h)} · last event{" "}
                  {hook.last_event_at ? (
                    <time dateTime={hook.last_event_at}>{ago(hook.last_event_at)}</time>
                  ) : (
                    "never"
                  )}
                </p>
              </li>
            ))}
          </ul>
        )}
      </section>
      <section aria-labelledby="recent-title">
        <h2 id="recent-title" className="mb-2 text-lg font-semibold">
          Newest events
        </h2>
        {data.recent_events.length === 0 ? (
          <Empty>No events yet: send one to a webhook's URL.</Empty>
        ) : (
          <ul className="divide-y divide-line rounded-lg border border-line bg-panel">
            {data.recent_events.map((event) => (
              <li key={event.id} className="flex flex-wrap items-center gap-4 px-4 py-2 text-sm">
                <StatusBadge status={event.status} />
                <Link to="/events/$eventId" params={{ eventId: event.id }} className="font-mono">
                  {event.request_id}
                </Link>
                <span>{event.webhook_name}</span>
                <span className="text-muted">{event.content_type ?? "no content type"}</span>
                <span className="ml-auto">
                  <Time iso={event.created_at} />
                </span>
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  );
}
