import { useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { statsQuery } from "../api/queries";
import type { StatsWindow } from "../api/types";
import { percent, quantile } from "../lib/format";
import { ErrorText, Loading, Sparkline } from "./ui";

const WINDOWS: { value: StatsWindow; label: string; unit: string }[] = [
  { value: "1h", label: "Last hour", unit: "minute" },
  { value: "24h", label: "Last 24 hours", unit: "hour" },
  { value: "7d", label: "Last 7 days", unit: "hour" },
];

/** A webhook's delivery stats over a window (kept in the URL as `?window=`; the router marks
 * the chosen window's link `aria-current="page"`): counts, success rate, p50 / p95 latency and a
 * delivered-vs-failed sparkline. */
export function StatsPanel({ name, window }: { name: string; window: StatsWindow }) {
  const stats = useQuery(statsQuery(name, window));
  const chosen = WINDOWS.find((w) => w.value === window) ?? WINDOWS[1];
  const totals = stats.data?.totals;
  const quiet = totals && totals.received + totals.rejected + totals.attempts === 0;
  return (
    <section
      aria-labelledby="stats-title"
      className="rounded-lg border border-line bg-panel p-3"
      data-testid="stats-panel"
    >
      <div className="mb-2 flex flex-wrap items-center gap-3">
        <h2 id="stats-title" className="font-semibold">
          Delivery stats
        </h2>
        <nav aria-label="Stats window" className="flex gap-1 text-sm">
          {WINDOWS.map((w) => (
            <Link
              key={w.value}
              from="/webhooks/$name/events"
              search={(prev) => ({ ...prev, window: w.value === "24h" ? undefined : w.value })}
              replace
              activeOptions={{ exact: true, includeSearch: true }}
              className={`rounded border px-2 py-0.5 no-underline ${w.value === window ? "border-accent font-semibold text-fg" : "border-line text-fg"}`}
            >
              {w.label}
            </Link>
          ))}
        </nav>
      </div>
      {stats.isPending ? (
        <Loading what="stats" />
      ) : stats.error ? (
        <ErrorText error={stats.error} />
      ) : !totals || quiet ? (
        <p className="text-sm text-muted">
          No traffic in this window ({chosen.label.toLowerCase()}).
        </p>
      ) : (
        <div className="flex flex-wrap items-center gap-x-6 gap-y-2">
          <dl className="grid grid-cols-4 gap-x-4 gap-y-1 text-sm md:grid-cols-7">
            {(
              [
                ["Received", totals.received],
                ["Delivered", totals.delivered],
                ["Failed", totals.failed],
                ["Rejected", totals.rejected],
                ["Success rate", percent(totals.success_rate)],
                ["p50 latency", quantile(totals.latency.p50_ms, 0.5, totals.latency)],
                ["p95 latency", quantile(totals.latency.p95_ms, 0.95, totals.latency)],
              ] as const
            ).map(([label, value]) => (
              <div key={label}>
                <dt className="text-muted">{label}</dt>
                <dd className="font-medium">{value}</dd>
              </div>
            ))}
          </dl>
          <Sparkline
            points={stats.data.series}
            label={`${name}, ${chosen.label.toLowerCase()}`}
            unit={chosen.unit}
          />
        </div>
      )}
    </section>
  );
}
