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

/** A list row. The fields after the generated ones arrive with the event store's next
 * version: each is optional here and the screens show "—" while it is absent. */
export type EventSummary = S["EventSummary"] & {
  body_size?: number;
  attempt_count?: number;
  last_status_code?: number | null;
  last_latency_ms?: number | null;
  next_retry_at?: string | null;
};

export type EventPage = { items: EventSummary[]; next_cursor: string | null };

export type Counts = { pending: number; success: number; failed: number; total: number };

export type WebhookOverview = S["WebhookOverview"] & {
  /** Hourly event counts of the last 24 h, oldest first (once the API sends them). */
  buckets_24h?: number[];
};
export type Overview = { webhooks: WebhookOverview[]; recent_events: EventSummary[] };

export type ReplayPreview = S["ReplayPreview"];
