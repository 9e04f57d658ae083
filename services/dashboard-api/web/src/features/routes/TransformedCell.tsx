import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { eventQuery } from "../../api/queries";
import type { DryRunEvent } from "../../api/types";
import { ErrorText, Loading } from "../../components/ui";
import { BodyDiff } from "../transformations/BodyDiff";
import { eventBody } from "../transformations/TestPanel";

/** The stored event's body, fetched once the diff is opened, against what the transformation
 * returned. */
function Diff({ eventId, after }: { eventId: string; after: unknown }) {
  const event = useQuery(eventQuery(eventId));
  if (event.isPending) return <Loading what="the event's body" />;
  if (event.error) return <ErrorText error={event.error} />;
  return <BodyDiff before={eventBody(event.data)} after={after} />;
}

/** A dry run's transformation of one matched event: its error, or its body as a diff against
 * the event's (opened on demand: the event's body is fetched then). */
export function TransformedCell({ event }: { event: DryRunEvent }) {
  const [open, setOpen] = useState(false);
  const result = event.transform;
  if (!event.matched || !result) return <span className="text-muted">—</span>;
  if (result.error || !result.request) {
    const place = result.error?.line ? ` (line ${result.error.line}:${result.error.column})` : "";
    return (
      <span className="text-bad">
        <span aria-hidden="true">✗ </span>
        Failed{place}: {result.error?.message}
      </span>
    );
  }
  return (
    <details onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary className="cursor-pointer">
        <span aria-hidden="true">✓ </span>
        {result.transformation} v{result.version}: body diff
      </summary>
      {open && <Diff eventId={event.event_id} after={result.request.body ?? null} />}
    </details>
  );
}
