import { queryOptions } from "@tanstack/react-query";
import { api, call, getJson, setCsrfToken } from "./client";
import type { Counts, Me, Overview, StatsWindow, Webhook, WebhookStats } from "./types";

export const meQuery = queryOptions({
  queryKey: ["me"],
  queryFn: async (): Promise<Me> => {
    const me = await call(() => api.GET("/api/v1/me"));
    setCsrfToken(me.csrf_token ?? null);
    return me;
  },
  staleTime: 60_000,
  retry: false,
});

export const webhooksQuery = queryOptions({
  queryKey: ["webhooks"],
  queryFn: (): Promise<Webhook[]> => call(() => api.GET("/api/v1/webhooks")),
});

export const overviewQuery = queryOptions({
  queryKey: ["overview"],
  queryFn: (): Promise<Overview> => call(() => api.GET("/api/v1/overview")),
  refetchInterval: 15_000,
});

/** A webhook's delivery stats over a window ending now (totals and one point per bucket). */
export function statsQuery(name: string, window: StatsWindow) {
  return queryOptions({
    queryKey: ["stats", name, window],
    queryFn: (): Promise<WebhookStats> =>
      call(() =>
        api.GET("/api/v1/webhooks/{name}/stats", { params: { path: { name }, query: { window } } }),
      ),
    refetchInterval: 15_000,
  });
}

export function eventQuery(id: string) {
  return queryOptions({
    queryKey: ["event", id],
    queryFn: () =>
      call(() => api.GET("/api/v1/events/{event_id}", { params: { path: { event_id: id } } })),
  });
}

/** Counts per status; undefined while the API has no counts endpoint (the tabs show no numbers). */
export function countsQuery(name: string, since?: string, until?: string) {
  return queryOptions({
    queryKey: ["counts", name, since, until],
    queryFn: async (): Promise<Counts | null> => {
      try {
        return await getJson<Counts>(`/api/v1/webhooks/${encodeURIComponent(name)}/events/counts`, {
          since,
          until,
        });
      } catch {
        return null;
      }
    },
    refetchInterval: 10_000,
  });
}
