import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useId } from "react";
import { ApiError } from "../../api/client";
import { Empty, ErrorText, inputClass, Loading, Time } from "../../components/ui";
import { dryRunQuery } from "./api";

export const LAST_CHOICES = [10, 20, 50, 100] as const;

/** The route as it stands in the editor (saved or not) against the webhook's newest events:
 * matched or not, and why, per event. Nothing is delivered. */
export function DryRunPanel({
  webhook,
  route,
  filter,
  enabled,
  last,
  onLast,
}: {
  webhook: string;
  route: string;
  /** undefined: the filter does not parse, there is nothing to try */
  filter: Record<string, unknown> | null | undefined;
  enabled: boolean;
  last: number;
  onLast: (last: number) => void;
}) {
  const titleId = useId();
  const run = useQuery({
    ...dryRunQuery(webhook, route, filter ?? null, enabled, last),
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
        <p className="text-sm text-muted">Fix the filter to see which events it takes.</p>
      ) : run.isPending ? (
        <Loading what="the dry run" />
      ) : run.error ? (
        <ErrorText error={run.error} />
      ) : run.data.events.length === 0 ? (
        <Empty>This webhook has no stored events yet: send one, then try again.</Empty>
      ) : (
        <table className="w-full text-sm">
          <caption className="sr-only">Dry run, newest event first</caption>
          <thead>
            <tr className="text-left">
              <th className="p-1.5">Result</th>
              <th className="p-1.5">Received</th>
              <th className="p-1.5">Event</th>
              <th className="p-1.5">Why</th>
            </tr>
          </thead>
          <tbody>
            {run.data.events.map((e) => (
              <tr key={e.event_id} className="border-t border-line align-top">
                <td className="whitespace-nowrap p-1.5">
                  {e.matched ? (
                    <span className="font-medium text-ok">
                      <span aria-hidden="true">✓ </span>Matched
                    </span>
                  ) : (
                    <span className="font-medium text-bad">
                      <span aria-hidden="true">✗ </span>Not matched
                    </span>
                  )}
                </td>
                <td className="whitespace-nowrap p-1.5">
                  <Time iso={e.created_at} />
                </td>
                <td className="p-1.5 font-mono">
                  <Link to="/events/$eventId" params={{ eventId: e.event_id }}>
                    {e.request_id}
                  </Link>
                </td>
                <td className="break-words p-1.5 font-mono text-xs">
                  {e.matched ? "—" : e.reason}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
