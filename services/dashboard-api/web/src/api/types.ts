import type { components } from "./schema";

type S = components["schemas"];

export type Me = S["Me"];
export type Webhook = S["WebhookRead"];
export type WebhookWritten = S["WebhookWritten"];
export type EventDetail = S["EventDetail"];
export type Attempt = S["AttemptRead"];
export type Token = S["TokenRead"];
export type TokenIssued = S["TokenIssued"];
export type AdminUser = S["UserRead"];
export type ReplayJob = S["ReplayJobRead"];
export type Status = S["EventStatus"];
export type StatusFilter = "all" | "success" | "failed" | "pending";

/** A list row. `attempt_count` is not in the API yet: optional, the list shows "—" without it. */
export type EventSummary = S["EventSummary"] & { attempt_count?: number };

export type EventPage = { items: EventSummary[]; next_cursor: string | null };

export type Counts = S["EventCounts"];

export type WebhookOverview = S["WebhookOverview"] & {
  /** Hourly event counts of the last 24 h, oldest first (once the API sends them). */
  buckets_24h?: number[];
};
export type Overview = { webhooks: WebhookOverview[]; recent_events: EventSummary[] };

export type ReplayPreview = S["ReplayPreview"];
