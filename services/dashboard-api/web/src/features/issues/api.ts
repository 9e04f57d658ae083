import { queryOptions } from "@tanstack/react-query";
import { api, call } from "../../api/client";
import type { Issue, IssueStatus } from "../../api/types";

export function issuesQuery(status: IssueStatus | null) {
  return queryOptions({
    queryKey: ["issues", status ?? "all"],
    queryFn: (): Promise<Issue[]> =>
      call(() => api.GET("/api/v1/issues", { params: { query: status ? { status } : {} } })),
  });
}

export type IssueAction = "acknowledge" | "resolve" | "ignore";

export function actOnIssue(id: string, action: IssueAction): Promise<Issue> {
  const path = { params: { path: { issue_id: id } } };
  if (action === "acknowledge")
    return call(() => api.POST("/api/v1/issues/{issue_id}/acknowledge", path));
  if (action === "resolve") return call(() => api.POST("/api/v1/issues/{issue_id}/resolve", path));
  return call(() => api.POST("/api/v1/issues/{issue_id}/ignore", path));
}
