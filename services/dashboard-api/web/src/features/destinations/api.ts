import { queryOptions } from "@tanstack/react-query";
import { api, call } from "../../api/client";
import type { Destination, DestinationHealth } from "../../api/types";

export const destinationsQuery = queryOptions({
  queryKey: ["destinations"],
  queryFn: (): Promise<Destination[]> => call(() => api.GET("/api/v1/destinations")),
});

export function destinationQuery(dest: string) {
  return queryOptions({
    queryKey: ["destinations", dest],
    queryFn: (): Promise<Destination> =>
      call(() => api.GET("/api/v1/destinations/{dest}", { params: { path: { dest } } })),
  });
}

/** What the destination holds and its last errors, kept fresh while its page is open. */
export function destinationHealthQuery(dest: string) {
  return queryOptions({
    queryKey: ["destinations", dest, "health"],
    queryFn: (): Promise<DestinationHealth> =>
      call(() => api.GET("/api/v1/destinations/{dest}/health", { params: { path: { dest } } })),
    refetchInterval: 10_000,
  });
}

/** What the write-only header values read as; sent back, it keeps the stored value. */
export const MASK = "********";

/** The webhook whose `forward_url` destination `name` is (`<webhook>.forward_url`), else null:
 * its URL is set on the webhook, and it is deleted with it. */
export function forwardWebhook(name: string): string | null {
  return name.endsWith(".forward_url") ? name.slice(0, -".forward_url".length) : null;
}

/** The route a webhook's `forward_url` stands for. */
export const FORWARD_ROUTE = "forward_url";
