import { queryOptions } from "@tanstack/react-query";
import { api, call } from "../../api/client";
import type { DedupeRule, DryRunResult, Route, Transformation } from "../../api/types";

export function routesQuery(webhook: string) {
  return queryOptions({
    queryKey: ["routes", webhook],
    queryFn: (): Promise<Route[]> =>
      call(() =>
        api.GET("/api/v1/webhooks/{name}/routes", { params: { path: { name: webhook } } }),
      ),
  });
}

/** The caller's transformations, which a route may run. */
export const transformationsQuery = queryOptions({
  queryKey: ["transformations"],
  queryFn: (): Promise<Transformation[]> => call(() => api.GET("/api/v1/transformations")),
});

/** An unsaved route (its filter, enabled flag and deduplication rule) judged against the
 * webhook's `last` newest events; `route` only names the proposal (it needs not exist). */
export function dryRunQuery(
  webhook: string,
  route: string,
  filter: Record<string, unknown> | null,
  enabled: boolean,
  last: number,
  dedupe: DedupeRule | null = null,
  transform: string | null = null,
) {
  return queryOptions({
    queryKey: [
      "dry-run",
      webhook,
      route,
      JSON.stringify(filter),
      enabled,
      last,
      JSON.stringify(dedupe),
      transform,
    ],
    queryFn: (): Promise<DryRunResult> =>
      call(() =>
        api.POST("/api/v1/webhooks/{name}/routes/{route}/dry-run", {
          params: { path: { name: webhook, route } },
          body: { route: { filter, enabled, dedupe, transform }, last },
        }),
      ),
    retry: false,
  });
}

/** A filter in one short line: "every event" without one. */
export function filterSummary(filter: Route["filter"], max = 80): string {
  if (!filter || Object.keys(filter).length === 0) return "every event";
  const text = JSON.stringify(filter);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
