import type { Breaker } from "../../api/types";
import { Time } from "../../components/ui";
import { duration } from "../../lib/format";

const STATE: Record<Breaker["state"], { icon: string; label: string; className: string }> = {
  closed: { icon: "●", label: "Closed: deliveries go out", className: "text-ok" },
  open: { icon: "⊘", label: "Open: deliveries are held", className: "text-bad" },
  half_open: { icon: "◐", label: "Half-open: one probe is out", className: "text-wait" },
};

/** The destination's circuit breaker: its state, since when, the next probe, its thresholds. */
export function Health({ breaker }: { breaker: Breaker }) {
  const look = STATE[breaker.state];
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
    </section>
  );
}
