import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { getRouteApi, Link } from "@tanstack/react-router";
import type { Issue, IssueStatus } from "../../api/types";
import { Button, Empty, ErrorText, Loading, Time } from "../../components/ui";
import { announce } from "../../lib/announce";
import { actOnIssue, type IssueAction, issuesQuery } from "./api";

const route = getRouteApi("/_app/issues");

export const ISSUE_STATUSES: IssueStatus[] = ["open", "acknowledged", "resolved", "ignored"];

const TYPE: Record<Issue["type"], string> = {
  delivery: "Deliveries failing",
  disabled: "Destination disabled",
  backlog: "Backlog waiting",
  transformation: "Transformation failing",
};

const REASON: Record<string, string> = {
  breaker: "its circuit breaker opened",
  final_failure: "deliveries failed for good",
  gone: "it answered 410 Gone",
  sustained_failure: "it kept failing",
};

/** What an owner may do with an issue in `status` (the API refuses the others with 409). */
const ACTIONS: Record<IssueStatus, IssueAction[]> = {
  open: ["acknowledge", "resolve", "ignore"],
  acknowledged: ["resolve", "ignore"],
  resolved: [],
  ignored: ["resolve"],
};

const LABEL: Record<IssueAction, string> = {
  acknowledge: "Acknowledge",
  resolve: "Resolve",
  ignore: "Ignore",
};

/** The owner's issues (a destination failing or disabled, a backlog, a transformation failing):
 * one status at a time, with acknowledge / resolve / ignore. */
export function Issues() {
  const { status = "open" } = route.useSearch();
  const navigate = route.useNavigate();
  const { data, error, isPending } = useQuery(issuesQuery(status));
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">Issues</h1>
      <p className="text-sm text-muted">
        A problem of one of your destinations, opened once and counted while it lasts; resolved by
        itself when the destination recovers. Your{" "}
        <Link to="/alert-channels" className="underline">
          alert channels
        </Link>{" "}
        are told when one opens, reopens or is resolved.
      </p>
      <div role="tablist" aria-label="Issue status" className="flex gap-1">
        {ISSUE_STATUSES.map((s) => (
          <button
            key={s}
            type="button"
            role="tab"
            aria-selected={s === status}
            className={`rounded border border-line px-3 py-1 text-sm capitalize ${s === status ? "bg-accent text-on-accent" : "bg-panel hover:bg-hover"}`}
            onClick={() => navigate({ search: { status: s } })}
          >
            {s}
          </button>
        ))}
      </div>
      {isPending ? (
        <Loading what="issues" />
      ) : error ? (
        <ErrorText error={error} />
      ) : data.length === 0 ? (
        <Empty>No {status} issues.</Empty>
      ) : (
        <table className="w-full rounded-lg border border-line bg-panel text-sm">
          <caption className="sr-only">Your {status} issues</caption>
          <thead>
            <tr className="text-left">
              <th className="p-2">Issue</th>
              <th className="p-2">About</th>
              <th className="p-2">Count</th>
              <th className="p-2">First seen</th>
              <th className="p-2">Last seen</th>
              <th className="p-2">Sample</th>
              <th className="p-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {data.map((issue) => (
              <IssueRow key={issue.id} issue={issue} />
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function IssueRow({ issue }: { issue: Issue }) {
  const client = useQueryClient();
  const act = useMutation({
    mutationFn: (action: IssueAction) => actOnIssue(issue.id, action),
    onSuccess: (changed) => {
      announce(`Issue ${changed.status}`);
      return client.invalidateQueries({ queryKey: ["issues"] });
    },
  });
  const about = issue.destination ?? issue.transformation;
  return (
    <tr className="border-t border-line align-top" data-testid="issue">
      <td className="p-2">
        <div className="font-medium">{TYPE[issue.type] ?? issue.type}</div>
        {issue.reason && <div className="text-muted">{REASON[issue.reason] ?? issue.reason}</div>}
      </td>
      <td className="p-2 font-mono">
        {issue.destination ? (
          <Link to="/destinations/$dest" params={{ dest: issue.destination }}>
            {issue.destination}
          </Link>
        ) : (
          (about ?? "—")
        )}
      </td>
      <td className="p-2">{issue.count}</td>
      <td className="p-2">
        <Time iso={issue.first_seen_at} />
      </td>
      <td className="p-2">
        <Time iso={issue.last_seen_at} />
      </td>
      <td className="p-2">
        {issue.sample_event_id ? (
          <Link to="/events/$eventId" params={{ eventId: issue.sample_event_id }}>
            event
          </Link>
        ) : (
          "—"
        )}
      </td>
      <td className="p-2">
        <div className="flex flex-wrap gap-1">
          {ACTIONS[issue.status].map((action) => (
            <Button
              key={action}
              disabled={act.isPending}
              aria-label={`${LABEL[action]} the issue about ${about ?? "it"}`}
              onClick={() => act.mutate(action)}
            >
              {LABEL[action]}
            </Button>
          ))}
        </div>
        <ErrorText error={act.error} />
      </td>
    </tr>
  );
}
