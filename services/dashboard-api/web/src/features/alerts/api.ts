import { queryOptions } from "@tanstack/react-query";
import { api, call } from "../../api/client";
import type { AlertChannel } from "../../api/types";

export const channelsQuery = queryOptions({
  queryKey: ["alert-channels"],
  queryFn: (): Promise<AlertChannel[]> => call(() => api.GET("/api/v1/alert-channels")),
});

/** Where a channel's notifications go, as its owner reads it (secrets stay masked). */
export function channelTarget(channel: AlertChannel): string {
  if (channel.type === "email") return channel.to ?? "";
  if (channel.type === "pagerduty") return channel.events_url ?? "PagerDuty Events API v2";
  return channel.url ?? "";
}
