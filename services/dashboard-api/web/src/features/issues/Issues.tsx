import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { getRouteApi, Link } from "@tanstack/react-router";
import type { Issue, IssueStatus } from "../../api/types";
import { type Column, DataTable } from "../../components/DataTable";
import { Button, ErrorText, Loading, Time } from "../../components/ui";
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
      ) : (
        <DataTable
          caption={`Your ${status} issues`}
          columns={COLUMNS}
          rows={data}
          rowKey={(issue) => issue.id}
          empty={`No ${status} issues.`}
          rowTestId="issue"
        />
      )}
    </div>
  );
}

/** What the issue is about: its destination or its transformation. */
function aboutOf(issue: Issue): string | null | undefined {
  return issue.destination ?? issue.transformation;
}

const COLUMNS: Column<Issue>[] = [
  {
    header: "Issue",
    cell: (issue) => (
      <>
        <div className="font-medium">{TYPE[issue.type] ?? issue.type}</div>
        {issue.reason && <div className="text-muted">{REASON[issue.reason] ?? issue.reason}</div>}
      </>
    ),
  },
  {
    header: "About",
    className: "font-mono",
    cell: (issue) =>
      issue.destination ? (
        <Link to="/destinations/$dest" params={{ dest: issue.destination }}>
          {issue.destination}
        </Link>
      ) : (
        (aboutOf(issue) ?? "—")
      ),
  },
  { header: "Count", cell: (issue) => issue.count },
  { header: "First seen", cell: (issue) => <Time iso={issue.first_seen_at} /> },
  { header: "Last seen", cell: (issue) => <Time iso={issue.last_seen_at} /> },
  {
    header: "Sample",
    cell: (issue) =>
      issue.sample_event_id ? (
        <Link to="/events/$eventId" params={{ eventId: issue.sample_event_id }}>
          event
        </Link>
      ) : (
        "—"
      ),
  },
  { header: "Actions", srOnly: true, cell: (issue) => <IssueActions issue={issue} /> },
];

function IssueActions({ issue }: { issue: Issue }) {
  const client = useQueryClient();
  const act = useMutation({
    mutationFn: (action: IssueAction) => actOnIssue(issue.id, action),
    onSuccess: (changed) => {
      announce(`Issue ${changed.status}`);
      return client.invalidateQueries({ queryKey: ["issues"] });
    },
  });
  const about = aboutOf(issue);
  return (
    <>
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
    </>
  );
}
