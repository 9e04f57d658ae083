import { useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import type { Breaker, DestinationHealth, FailedAttempt } from "../../api/types";
import { ErrorText, Loading, Time } from "../../components/ui";
import { ago, duration } from "../../lib/format";
import { destinationHealthQuery } from "./api";

const STATE: Record<Breaker["state"], { icon: string; label: string; className: string }> = {
  closed: { icon: "●", label: "Closed: deliveries go out", className: "text-ok" },
  open: { icon: "⊘", label: "Open: deliveries are held", className: "text-bad" },
  half_open: { icon: "◐", label: "Half-open: one probe is out", className: "text-wait" },
};

/** The destination's circuit breaker (its state, since when, the next probe, its thresholds),
 * what it holds and its last failed attempts. */
export function Health({ dest, breaker }: { dest: string; breaker: Breaker }) {
  const look = STATE[breaker.state];
  const figures = useQuery(destinationHealthQuery(dest));
  return (
    <section
      aria-labelledby="health-title"
      className="space-y-2 rounded-lg border border-line bg-panel p-4 text-sm"
    >
      <h2 id="health-title" className="text-lg font-semibold">
        Health
      </h2>
      <p className={`font-medium ${look.className}`} data-testid="breaker-state">
        <span aria-hidden="true">{look.icon}</span> Circuit breaker {look.label.toLowerCase()}
      </p>
      <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1">
        {breaker.opened_at && (
          <>
            <dt className="font-medium">Failing since</dt>
            <dd>
              <Time iso={breaker.opened_at} />
            </dd>
          </>
        )}
        {breaker.next_probe_at && (
          <>
            <dt className="font-medium">Next probe</dt>
            <dd>
              <Time iso={breaker.next_probe_at} />
            </dd>
          </>
        )}
        <dt className="font-medium">Opens</dt>
        <dd>
          when {breaker.failure_pct} % of at least {breaker.min_attempts} attempts in{" "}
          {duration(breaker.window_s)} fail, or {breaker.consecutive} in a row
        </dd>
        <dt className="font-medium">Probes</dt>
        <dd>
          after {duration(breaker.cooldown_s)}, doubling up to {duration(breaker.max_cooldown_s)}
        </dd>
        <dt className="font-medium">Disabled</dt>
        <dd>after {duration(breaker.disable_after_s)} open, or at once on 410 Gone</dd>
      </dl>
      {figures.isPending ? (
        <Loading what="what it holds" />
      ) : figures.error ? (
        <ErrorText error={figures.error} />
      ) : (
        <Figures health={figures.data} />
      )}
    </section>
  );
}

function Figures({ health }: { health: DestinationHealth }) {
  return (
    <>
      <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1">
        <dt className="font-medium">Held deliveries</dt>
        <dd data-testid="held-count">{health.held}</dd>
        <dt className="font-medium">Oldest held</dt>
        <dd data-testid="oldest-held">
          {health.oldest_held_at ? (
            <>
              {ago(health.oldest_held_at)} (<Time iso={health.oldest_held_at} />)
            </>
          ) : (
            "—"
          )}
        </dd>
      </dl>
      <h3 className="pt-2 font-semibold">Last errors</h3>
      {health.last_errors.length === 0 ? (
        <p className="text-muted">No failed attempts.</p>
      ) : (
        <table className="w-full text-left">
          <caption className="sr-only">Last errors, newest first</caption>
          <thead>
            <tr>
              <th scope="col" className="p-1 font-medium">
                When
              </th>
              <th scope="col" className="p-1 font-medium">
                Answer
              </th>
              <th scope="col" className="p-1 font-medium">
                Event
              </th>
            </tr>
          </thead>
          <tbody>
            {health.last_errors.map((failure) => (
              <ErrorRow key={`${failure.at}-${failure.event_id}`} failure={failure} />
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function ErrorRow({ failure }: { failure: FailedAttempt }) {
  return (
    <tr data-testid="last-error" className="border-t border-line">
      <td className="p-1">
        <Time iso={failure.at} />
      </td>
      <td className="p-1 break-all">
        {failure.status_code !== null
          ? `HTTP ${failure.status_code}`
          : (failure.error ?? "no answer")}
      </td>
      <td className="p-1 font-mono">
        <Link to="/events/$eventId" params={{ eventId: failure.event_id }}>
          {failure.event_id}
        </Link>
      </td>
    </tr>
  );
}
