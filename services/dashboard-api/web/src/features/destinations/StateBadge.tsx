import type { Destination } from "../../api/types";

const REASON: Record<string, string> = {
  manual: "paused by you",
  breaker: "kept failing; probed until it answers",
  gone: "answered 410 Gone",
  sustained_failure: "failing for too long",
};

/** The destination's state as an icon and words (never colour alone), with its reason. */
export function StateBadge({ destination }: { destination: Destination }) {
  const { state, state_reason: reason } = destination;
  const look = {
    active: { icon: "●", label: "Active", className: "text-ok" },
    paused: { icon: "❚❚", label: "Paused", className: "text-wait" },
    disabled: { icon: "⊘", label: "Disabled", className: "text-bad" },
  }[state];
  return (
    <span
      className={`inline-flex items-center gap-1 rounded border border-line px-1.5 text-xs font-medium ${look.className}`}
      data-testid="destination-state"
    >
      <span aria-hidden="true">{look.icon}</span>
      {look.label}
      {reason && <span className="font-normal">({REASON[reason] ?? reason})</span>}
    </span>
  );
}

export function rateText(destination: Destination): string {
  const rate = destination.rate_limit;
  return rate ? `${rate.count} / ${rate.period}` : "no limit";
}
