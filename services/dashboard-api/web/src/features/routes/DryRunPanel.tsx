import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useId } from "react";
import { ApiError } from "../../api/client";
import type { DedupeRule, DryRunDedupe, DryRunEvent } from "../../api/types";
import { type Column, DataTable } from "../../components/DataTable";
import { ErrorText, inputClass, Loading, Time } from "../../components/ui";
import { dryRunQuery } from "./api";
import { TransformedCell } from "./TransformedCell";

export const LAST_CHOICES = [10, 20, 50, 100] as const;

const COLUMNS: Column<DryRunEvent>[] = [
  {
    header: "Result",
    className: "whitespace-nowrap",
    cell: (e) =>
      e.matched ? (
        <span className="font-medium text-ok">
          <span aria-hidden="true">✓ </span>Matched
        </span>
      ) : (
        <span className="font-medium text-bad">
          <span aria-hidden="true">✗ </span>Not matched
        </span>
      ),
  },
  { header: "Received", className: "whitespace-nowrap", cell: (e) => <Time iso={e.created_at} /> },
  {
    header: "Event",
    className: "font-mono",
    cell: (e) => (
      <Link to="/events/$eventId" params={{ eventId: e.event_id }}>
        {e.request_id}
      </Link>
    ),
  },
  {
    header: "Why",
    className: "break-words font-mono text-xs",
    cell: (e) => (e.matched ? "—" : e.reason),
  },
];

/** A matched event's deduplication key: the fields' values, or "no key" and what is missing. */
function dedupeKey(shown: DryRunDedupe | null | undefined): string {
  if (!shown) return "—";
  if (shown.key === null) return `no key (${shown.missing.join(", ")} missing)`;
  return Object.entries(shown.fields)
    .map(([path, value]) => `${path}=${JSON.stringify(value)}`)
    .join(", ");
}

const DEDUPE_COLUMN: Column<DryRunEvent> = {
  header: "Dedupe key",
  className: "break-words font-mono text-xs",
  cell: (e) => dedupeKey(e.dedupe),
};

const TRANSFORM_COLUMN: Column<DryRunEvent> = {
  header: "Transformed",
  className: "text-sm",
  cell: (e) => <TransformedCell event={e} />,
};

/** The route as it stands in the editor (saved or not) against the webhook's newest events:
 * matched or not, and why, per event. Nothing is delivered. */
export function DryRunPanel({
  webhook,
  route,
  filter,
  enabled,
  last,
  onLast,
  dedupe = null,
  transform = null,
}: {
  webhook: string;
  route: string;
  /** undefined: the filter does not parse, there is nothing to try */
  filter: Record<string, unknown> | null | undefined;
  enabled: boolean;
  last: number;
  onLast: (last: number) => void;
  /** the route's deduplication rule: each matched event's key is shown (nothing is claimed) */
  dedupe?: DedupeRule | null;
  /** the route's transformation: each matched event's transformed body is shown against its own */
  transform?: string | null;
}) {
  const titleId = useId();
  const run = useQuery({
    ...dryRunQuery(webhook, route, filter ?? null, enabled, last, dedupe, transform),
    enabled: filter !== undefined,
    placeholderData: keepPreviousData,
  });
  const refused = run.error instanceof ApiError && run.error.status === 422;
  return (
    <section aria-labelledby={titleId} className="space-y-2 rounded border border-line p-3">
      <div className="flex flex-wrap items-end gap-3">
        <h3 id={titleId} className="font-semibold">
          Dry run
        </h3>
        <label className="flex items-center gap-2 text-sm">
          <span>Newest events</span>
          <select
            className={inputClass}
            value={last}
            onChange={(e) => onLast(Number(e.target.value))}
          >
            {LAST_CHOICES.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        {run.data && !refused && filter !== undefined && (
          <p role="status" className="text-sm" data-testid="dry-run-summary">
            {run.data.matched} of {run.data.evaluated} matched
            {run.isFetching ? " (updating…)" : ""}
          </p>
        )}
      </div>
      <p className="text-xs text-muted">
        The route as edited, tried against this webhook's newest stored events. Nothing is
        delivered.
      </p>
      {filter === undefined || refused ? (
        <p className="text-sm text-muted">
          {dedupe && filter !== undefined
            ? "Fix the filter or the deduplication rule to see which events it takes."
            : "Fix the filter to see which events it takes."}
        </p>
      ) : run.isPending ? (
        <Loading what="the dry run" />
      ) : run.error ? (
        <ErrorText error={run.error} />
      ) : (
        <DataTable
          caption="Dry run, newest event first"
          columns={[
            ...COLUMNS,
            ...(dedupe ? [DEDUPE_COLUMN] : []),
            ...(transform ? [TRANSFORM_COLUMN] : []),
          ]}
          rows={run.data.events}
          rowKey={(e) => e.event_id}
          empty="This webhook has no stored events yet: send one, then try again."
          look="inset"
        />
      )}
    </section>
  );
}
