import type { components } from "./schema";

type S = components["schemas"];

export type Me = S["Me"];
export type Webhook = S["WebhookRead"];
export type VerificationType = S["VerificationType"];
export type VerificationWrite = S["VerificationWrite"];
export type EventVerification = S["EventVerification"];
export type WebhookWritten = S["WebhookWritten"];
export type EventDetail = S["EventDetail"];
export type Attempt = S["AttemptRead"];
export type Delivery = S["DeliveryRead"];
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

export type WebhookOverview = S["WebhookOverview"];
export type Overview = S["Overview"];

export type WebhookStats = S["WebhookStats"];
export type StatsPoint = S["StatsPoint"];
export type StatsWindow = S["StatsWindow"];
export type LatencyStats = S["LatencyStats"];

export type ReplayPreview = S["ReplayPreview"];

export type Destination = S["DestinationRead"];
export type DestinationCreate = S["DestinationCreate"];
export type DestinationUpdate = S["DestinationUpdate"];
export type DestinationHealth = S["DestinationHealthRead"];
export type FailedAttempt = S["FailedAttemptRead"];
export type DestinationState = S["DestinationState"];
export type Route = S["RouteRead"];
export type RouteCreate = S["RouteCreate"];
export type RouteDraft = S["RouteDraft"];
export type DryRunResult = S["DryRunResult"];
export type DryRunEvent = S["DryRunEvent"];
export type DedupeRule = S["DedupeRule"];
export type DedupePreset = S["DedupePreset"];
export type DryRunDedupe = S["DryRunDedupe"];
export type DryRunTransform = S["DryRunTransform"];
export type Transformation = S["TransformationRead"];
export type TransformationTestResult = S["TransformationTestResult"];
export type TransformRequest = S["RequestBody"];
export type TransformTrace = S["TransformTraceRead"];

export type Issue = S["IssueRead"];
export type IssueStatus = S["IssueStatus"];
export type AlertChannel = S["AlertChannelRead"];
export type AlertChannelCreate = S["AlertChannelCreate"];
export type AlertChannelType = S["AlertChannelType"];
export type Breaker = S["BreakerRead"];
