import { useQuery, useQueryClient } from "@tanstack/react-query";
import { getRouteApi, Link, useNavigate, useRouter } from "@tanstack/react-router";
import { Tabs } from "radix-ui";
import { useEffect, useMemo, useState } from "react";
import { JsonView } from "react-json-view-lite";
import { api, call } from "../api/client";
import { eventQuery, webhooksQuery } from "../api/queries";
import type { Attempt, Delivery, EventDetail as Detail, EventVerification } from "../api/types";
import {
  Button,
  Confirm,
  CopyButton,
  ErrorText,
  Field,
  inputClass,
  Loading,
  Signature,
  StatusBadge,
  Time,
} from "../components/ui";
import { TransformTraces } from "../features/transformations/Trace";
import { announce } from "../lib/announce";
import { copyText } from "../lib/clipboard";
import { type BodyKind, bodyBytes, bodyKind, curlFor, hexDump, indentXml } from "../lib/format";
import { useShortcuts } from "../lib/keys";

const route = getRouteApi("/_app/events/$eventId");
const HEX_LINES = 4096;
const JSON_STYLE = {
  container: "json-tree",
  basicChildStyle: "json-basic",
  label: "json-label",
  clickableLabel: "json-label",
  nullValue: "json-null",
  undefinedValue: "json-undefined",
  numberValue: "json-number",
  stringValue: "json-string",
  booleanValue: "json-boolean",
  otherValue: "json-basic",
  punctuation: "json-punct",
  expandIcon: "json-expander json-closed",
  collapseIcon: "json-expander json-open",
  collapsedContent: "json-collapsed",
  childFieldsContainer: "json-child",
  ariaLables: { collapseJson: "Collapse", expandJson: "Expand" },
  stringifyStringValues: false,
};

function Pretty({ kind, text }: { kind: BodyKind; text: string }) {
  if (kind === "json") {
    try {
      const data = JSON.parse(text);
      if (data !== null && typeof data === "object")
        return <JsonView data={data} style={JSON_STYLE} />;
    } catch {
      return <p className="text-sm text-muted">Not valid JSON: see Raw.</p>;
    }
  }
  if (kind === "xml")
    return <pre className="whitespace-pre-wrap break-all font-mono text-sm">{indentXml(text)}</pre>;
  if (kind === "form") {
    const fields = [...new URLSearchParams(text)];
    return (
      <table className="text-sm">
        <thead>
          <tr>
            <th className="pr-4 text-left">Field</th>
            <th className="text-left">Value</th>
          </tr>
        </thead>
        <tbody>
          {fields.map(([k, v], i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: form fields may repeat
            <tr key={i}>
              <td className="pr-4 font-mono">{k}</td>
              <td className="break-all font-mono">{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    );
  }
  return <pre className="whitespace-pre-wrap break-all font-mono text-sm">{text}</pre>;
}

function Body({
  detail,
  tab,
  onTab,
}: {
  detail: Detail;
  tab?: string;
  onTab: (tab: string) => void;
}) {
  const data = useMemo(
    () => bodyBytes(detail.request_body, detail.request_body_encoding),
    [detail],
  );
  const kind = bodyKind(detail.content_type, detail.request_body, detail.request_body_encoding);
  const text = useMemo(() => new TextDecoder("utf-8", { fatal: false }).decode(data), [data]);
  const [allHex, setAllHex] = useState(false);
  const hex = useMemo(
    () => hexDump(data, allHex ? Number.POSITIVE_INFINITY : HEX_LINES),
    [data, allHex],
  );
  const current = tab ?? (kind === "binary" ? "hex" : kind === "text" ? "raw" : "pretty");
  const download = () => {
    const url = URL.createObjectURL(
      new Blob([data as BlobPart], { type: detail.content_type ?? "application/octet-stream" }),
    );
    const a = document.createElement("a");
    a.href = url;
    a.download = `${detail.id}.body`;
    a.click();
    URL.revokeObjectURL(url);
  };
  return (
    <section aria-labelledby="body-title" className="rounded-lg border border-line bg-panel p-4">
      <div className="mb-2 flex items-center gap-2">
        <h2 id="body-title" className="font-semibold">
          Body <span className="text-sm font-normal text-muted">({data.length} bytes)</span>
        </h2>
        <Button className="ml-auto" onClick={download}>
          Download body
        </Button>
      </div>
      <Tabs.Root value={current} onValueChange={onTab}>
        <Tabs.List aria-label="Body view" className="mb-2 flex gap-1 border-b border-line">
          {[
            ["pretty", "Pretty"],
            ["raw", "Raw"],
            ["hex", "Hex"],
          ].map(([value, label]) => (
            <Tabs.Trigger
              key={value}
              value={value}
              className="-mb-px border-b-2 border-transparent px-3 py-1 data-[state=active]:border-accent data-[state=active]:font-semibold"
            >
              {label}
            </Tabs.Trigger>
          ))}
        </Tabs.List>
        <Tabs.Content value="pretty" className="max-h-[32rem] overflow-auto">
          {kind === "binary" ? (
            <p className="text-sm text-muted">Binary body: see Hex.</p>
          ) : (
            <Pretty kind={kind} text={text} />
          )}
        </Tabs.Content>
        <Tabs.Content value="raw" className="max-h-[32rem] overflow-auto">
          <pre className="whitespace-pre-wrap break-all font-mono text-sm" data-testid="raw-body">
            {text}
          </pre>
        </Tabs.Content>
        <Tabs.Content value="hex" className="max-h-[32rem] overflow-auto">
          <pre className="font-mono text-xs">{hex.lines.join("\n")}</pre>
          {hex.more && (
            <Button onClick={() => setAllHex(true)}>Show all {data.length} bytes</Button>
          )}
        </Tabs.Content>
      </Tabs.Root>
    </section>
  );
}

function Headers({
  headers,
  filter,
  onFilter,
}: {
  headers: Record<string, string>;
  filter: string;
  onFilter: (f: string) => void;
}) {
  const shown = Object.entries(headers).filter(([k, v]) =>
    `${k}: ${v}`.toLowerCase().includes(filter.toLowerCase()),
  );
  return (
    <section aria-labelledby="headers-title" className="rounded-lg border border-line bg-panel p-4">
      <div className="mb-2 flex flex-wrap items-end gap-2">
        <h2 id="headers-title" className="font-semibold">
          Headers
        </h2>
        <Field label="Filter headers">
          <input
            className={inputClass}
            type="search"
            value={filter}
            onChange={(e) => onFilter(e.target.value)}
          />
        </Field>
        <span className="ml-auto">
          <CopyButton text={JSON.stringify(headers, null, 2)} what="headers" />
        </span>
      </div>
      <table className="w-full text-sm">
        <tbody>
          {shown.map(([k, v]) => (
            <tr key={k} className="border-t border-line align-top">
              <th scope="row" className="py-1 pr-4 text-left font-mono font-normal">
                {k}
              </th>
              <td className="break-all py-1 font-mono">{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 && <p className="text-sm text-muted">No header matches.</p>}
    </section>
  );
}

function Countdown({ iso }: { iso: string }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const seconds = Math.max(0, Math.round((new Date(iso).getTime() - now) / 1000));
  return <span>next retry in {seconds} s</span>;
}

const DELIVERY_TONE: Record<Delivery["status"], string> = {
  success: "text-ok",
  failed: "text-bad",
  transform_failed: "text-bad",
  held: "text-wait",
  scheduled: "text-wait",
  delivering: "text-wait",
  filtered: "text-muted",
  deduplicated: "text-muted",
};

const RETRYABLE: ReadonlySet<Delivery["status"]> = new Set(["failed", "success"]);

/** Retries one delivery alone (a new attempt chain of it, to its destination as it is now). */
function RetryDelivery({
  eventId,
  delivery,
  onQueued,
}: {
  eventId: string;
  delivery: Delivery;
  onQueued: (retried: Retried) => void;
}) {
  const client = useQueryClient();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function retry() {
    setBusy(true);
    setError(null);
    try {
      await call(() =>
        api.POST("/api/v1/deliveries/{delivery_id}/retry", {
          params: { path: { delivery_id: delivery.id } },
        }),
      );
      announce(`Retry of ${delivery.route} queued`);
      onQueued({ id: delivery.id, attempts: delivery.attempts.length });
      client.invalidateQueries({ queryKey: ["event", eventId] });
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  }
  return (
    <>
      <Button
        onClick={retry}
        disabled={busy}
        aria-label={`Retry the delivery over ${delivery.route}`}
      >
        {busy ? "Retrying…" : "Retry"}
      </Button>
      {error !== null && <ErrorText error={error} />}
    </>
  );
}

/** One row per route the event went through (its replays' routings too): where it went, where
 * that stands and why, and its attempts (listed in full below). A failed or delivered one can
 * be retried on its own. */
function Deliveries({
  eventId,
  deliveries,
  onRetried,
}: {
  eventId: string;
  deliveries: Delivery[];
  onRetried: (retried: Retried) => void;
}) {
  if (deliveries.length === 0) return null;
  return (
    <section
      aria-labelledby="deliveries-title"
      className="rounded-lg border border-line bg-panel p-4"
    >
      <h2 id="deliveries-title" className="mb-2 font-semibold">
        Deliveries
      </h2>
      <table className="w-full text-sm">
        <caption className="sr-only">The event's deliveries, one per route</caption>
        <thead>
          <tr className="text-left">
            <th className="p-1.5">Route</th>
            <th className="p-1.5">Destination</th>
            <th className="p-1.5">Status</th>
            <th className="p-1.5">Why</th>
            <th className="p-1.5">Attempts</th>
            <th className="p-1.5">Since</th>
            <th className="p-1.5">
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => {
            const last = d.attempts.at(-1);
            return (
              <tr key={d.id} className="border-t border-line align-top">
                <td className="p-1.5 font-mono">{d.route}</td>
                <td className="p-1.5 font-mono">{d.destination}</td>
                <td className={`p-1.5 font-medium ${DELIVERY_TONE[d.status]}`}>
                  {d.status.replace("_", " ")}
                </td>
                <td className="break-words p-1.5 font-mono text-xs">
                  <DeliveryReason delivery={d} />
                </td>
                <td className="whitespace-nowrap p-1.5">
                  {d.attempts.length}
                  {last && (
                    <span className="text-muted">
                      {" "}
                      (last: {last.status_code ? `HTTP ${last.status_code}` : "no response"})
                    </span>
                  )}
                </td>
                <td className="whitespace-nowrap p-1.5">
                  <Time iso={d.updated_at} />
                </td>
                <td className="p-1.5">
                  {RETRYABLE.has(d.status) && (
                    <RetryDelivery eventId={eventId} delivery={d} onQueued={onRetried} />
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}

function Attempts({ attempts }: { attempts: Attempt[] }) {
  const chains = new Map<string, Attempt[]>();
  for (const attempt of attempts)
    chains.set(attempt.chain_id, [...(chains.get(attempt.chain_id) ?? []), attempt]);
  return (
    <section
      aria-labelledby="attempts-title"
      className="rounded-lg border border-line bg-panel p-4"
    >
      <h2 id="attempts-title" className="mb-2 font-semibold">
        Delivery attempts
      </h2>
      {attempts.length === 0 && (
        <p className="text-sm text-muted">No attempts: nothing to deliver to, or not yet.</p>
      )}
      <ol className="space-y-4">
        {[...chains.entries()].map(([chain, list]) => (
          <li key={chain}>
            <h3 className="text-sm font-semibold">
              {chainTitle(list[0].trigger)}{" "}
              <span className="font-normal text-muted">
                to <span className="font-mono">{list[0].url}</span>
              </span>
            </h3>
            <ol className="ml-3 border-l border-line pl-3">
              {list.map((a) => (
                <li key={a.id} className="py-1 text-sm">
                  <div className="flex flex-wrap gap-3">
                    <span>
                      #{a.number} {a.trigger === "retry" ? "retry" : a.trigger}
                    </span>
                    <span className={a.status_code && a.status_code < 300 ? "text-ok" : "text-bad"}>
                      <span aria-hidden="true">
                        {a.status_code && a.status_code < 300 ? "✓ " : "✗ "}
                      </span>
                      {a.status_code ? `HTTP ${a.status_code}` : "no response"}
                    </span>
                    {a.latency_ms !== null && <span>{Math.round(a.latency_ms)} ms</span>}
                    <Time iso={a.started_at} />
                    {a.error && <span className="text-bad">{a.error}</span>}
                    {a.will_retry && a.next_retry_at && <Countdown iso={a.next_retry_at} />}
                  </div>
                  <details className="mt-1">
                    <summary className="cursor-pointer text-muted">Response</summary>
                    <table className="text-xs">
                      <tbody>
                        {Object.entries(a.response_headers).map(([k, v]) => (
                          <tr key={k}>
                            <th scope="row" className="pr-3 text-left font-mono font-normal">
                              {k}
                            </th>
                            <td className="break-all font-mono">{v}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                    <pre className="mt-1 max-h-64 overflow-auto whitespace-pre-wrap break-all font-mono text-xs">
                      {a.response_body_encoding === "base64"
                        ? `(binary, base64) ${a.response_body}`
                        : a.response_body}
                    </pre>
                    {a.response_body_truncated && (
                      <p className="text-xs text-wait">Truncated at 64 KiB.</p>
                    )}
                  </details>
                </li>
              ))}
            </ol>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** A delivery retried on its own: its id and its count of attempts when it was retried. */
type Retried = { id: string; attempts: number };
/** What the page waits for after a replay (the event's attempts and deliveries before it) or
 * after one delivery's retry. */
type Seen = { attempts: number; deliveries: number; retried?: Retried };
const FINISHED: ReadonlySet<string> = new Set(["success", "failed"]);

/** The replay or retry asked for (after `before`) has settled: a retried delivery has a new
 * attempt and has finished again; a routed event's new deliveries have all finished, or a
 * forward URL's replay has its final attempt and the event's status (recorded apart from the
 * attempts) has caught up with it. */
function replaySettled(data: Detail, before: Seen): boolean {
  if (before.retried) {
    const { id, attempts } = before.retried;
    const retried = data.deliveries.find((d) => d.id === id);
    return !!retried && retried.attempts.length > attempts && FINISHED.has(retried.status);
  }
  if (data.deliveries.length > before.deliveries) return data.status !== "pending";
  const last = data.attempts.at(-1);
  if (data.attempts.length <= before.attempts || !last || last.will_retry) return false;
  const delivered = last.status_code !== null && last.status_code >= 200 && last.status_code < 300;
  return data.status === (delivered ? "success" : "failed");
}

/** The verification verdict: the preset, valid / invalid / skipped, which secret matched (a
 * previous one means the sender still signs with a rotated-out secret) and why it failed. */
function Verdict({ verification }: { verification: EventVerification | null }) {
  if (!verification) return <span title="The webhook verifies nothing">— none</span>;
  const { type, result, secret, reason } = verification;
  const mark = result === "valid" ? "✓ " : result === "invalid" ? "✗ " : "– ";
  const tone = result === "valid" ? "text-ok" : result === "invalid" ? "text-bad" : "";
  return (
    <span className="flex flex-col">
      <span className={tone}>
        <span aria-hidden="true">{mark}</span>
        {result} ({type})
      </span>
      {secret && <span className="text-muted">matched the {secret} secret</span>}
      {reason && <span className="text-bad">reason: {reason.replaceAll("_", " ")}</span>}
    </span>
  );
}

export function EventDetail() {
  const { eventId } = route.useParams();
  const search = route.useSearch();
  const navigate = useNavigate({ from: "/events/$eventId" });
  const router = useRouter();
  const client = useQueryClient();
  const [awaiting, setAwaiting] = useState<Seen | null>(null);
  const detail = useQuery({
    ...eventQuery(eventId),
    refetchInterval: (q) =>
      awaiting !== null || q.state.data?.status === "pending" ? 1000 : false,
  });
  const hooks = useQuery(webhooksQuery);
  const [ask, setAsk] = useState(false);
  const [busy, setBusy] = useState(false);
  const [replayError, setReplayError] = useState<unknown>(null);
  const data = detail.data;
  useEffect(() => {
    if (data && awaiting !== null && replaySettled(data, awaiting)) {
      setAwaiting(null);
      const retried = awaiting.retried;
      const status = retried
        ? data.deliveries.find((d) => d.id === retried.id)?.status
        : data.status;
      announce(`${retried ? "Retry" : "Replay"} ${status === "success" ? "delivered" : "failed"}`);
    }
  }, [data, awaiting]);
  useEffect(() => {
    if (awaiting === null) return;
    const giveUp = setTimeout(() => setAwaiting(null), 60_000); // never poll for ever
    return () => clearTimeout(giveUp);
  }, [awaiting]);
  const url = hooks.data?.find((h) => h.id === data?.webhook_id)?.url;
  const curl =
    data && url
      ? curlFor(url, data.request_headers, data.request_body, data.request_body_encoding)
      : null;
  const back = () =>
    window.history.length > 1
      ? router.history.back()
      : data && navigate({ to: "/webhooks/$name/events", params: { name: data.webhook_name } });
  useShortcuts({
    Escape: back,
    r: () => setAsk(true),
    c: () => data && copyText(data.request_id, "Request ID"),
  });
  if (detail.isPending) return <Loading what="the event" />;
  if (detail.error || !data) return <ErrorText error={detail.error} />;

  async function replay() {
    setBusy(true);
    setReplayError(null);
    try {
      await call(() =>
        api.POST("/api/v1/events/{event_id}/replay", { params: { path: { event_id: eventId } } }),
      );
      setAwaiting({
        attempts: data?.attempts.length ?? 0,
        deliveries: data?.deliveries.length ?? 0,
      });
      announce("Replay queued");
      setAsk(false);
      client.invalidateQueries({ queryKey: ["event", eventId] });
    } catch (exc) {
      setReplayError(exc);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/webhooks/$name/events" params={{ name: data.webhook_name }}>
          ← Events of {data.webhook_name}
        </Link>
      </nav>
      <div className="flex flex-wrap items-center gap-3">
        <h1 className="font-mono text-xl font-semibold">{data.request_id}</h1>
        <StatusBadge status={data.status} />
        {data.handshake && (
          <span className="rounded border border-line px-1.5 text-xs" data-testid="handshake">
            Handshake: {data.handshake} (answered at intake, never forwarded)
          </span>
        )}
        <div className="ml-auto flex flex-wrap gap-2">
          <CopyButton text={data.request_id} what="Request ID" label="Copy request ID" />
          {curl && <CopyButton text={curl} what="curl command" label="Copy as curl" />}
          <Button variant="primary" onClick={() => setAsk(true)}>
            Replay
          </Button>
          <a
            href={`/api/v1/events/${encodeURIComponent(data.id)}/export`}
            download
            className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
          >
            Export JSON
          </a>
        </div>
      </div>
      <dl className="grid grid-cols-2 gap-x-6 gap-y-2 rounded-lg border border-line bg-panel p-4 text-sm md:grid-cols-4">
        <div>
          <dt className="text-muted">Received</dt>
          <dd>
            <Time iso={data.created_at} />
          </dd>
        </div>
        <div>
          <dt className="text-muted">Client IP</dt>
          <dd className="font-mono">{data.client_ip}</dd>
        </div>
        <div>
          <dt className="text-muted">Content type</dt>
          <dd>{data.content_type ?? "—"}</dd>
        </div>
        <div>
          <dt className="text-muted">Size</dt>
          <dd>{bodyBytes(data.request_body, data.request_body_encoding).length} bytes</dd>
        </div>
        <div>
          <dt className="text-muted">Signature</dt>
          <dd>
            <Signature valid={data.signature_valid} />
          </dd>
        </div>
        <div>
          <dt className="text-muted">Verification</dt>
          <dd data-testid="verification">
            <Verdict verification={data.verification ?? null} />
          </dd>
        </div>
        <div>
          <dt className="text-muted">Rejected</dt>
          <dd>{data.rejected_reason ? data.rejected_reason.replaceAll("_", " ") : "no"}</dd>
        </div>
        <div>
          <dt className="text-muted">Event ID</dt>
          <dd className="font-mono">{data.id}</dd>
        </div>
        <div>
          <dt className="text-muted">Forwarded to</dt>
          <dd className="break-all font-mono">{data.forward_url ?? "—"}</dd>
        </div>
      </dl>
      <Headers
        headers={data.request_headers}
        filter={search.hf ?? ""}
        onFilter={(hf) =>
          navigate({ search: (p) => ({ ...p, hf: hf || undefined }), replace: true })
        }
      />
      <Body
        detail={data}
        tab={search.tab}
        onTab={(tab) => navigate({ search: (p) => ({ ...p, tab }), replace: true })}
      />
      <Deliveries
        eventId={eventId}
        deliveries={data.deliveries}
        onRetried={(retried) =>
          setAwaiting({
            attempts: data.attempts.length,
            deliveries: data.deliveries.length,
            retried,
          })
        }
      />
      <TransformTraces deliveries={data.deliveries} />
      <Attempts attempts={data.attempts} />
      {awaiting !== null && (
        <p role="status" className="text-sm text-muted">
          {awaiting.retried
            ? "Waiting for the retried delivery…"
            : "Waiting for the replay attempt…"}
        </p>
      )}
      <Confirm
        open={ask}
        title="Replay this event?"
        confirmLabel="Replay"
        busy={busy}
        onConfirm={replay}
        onClose={() => setAsk(false)}
      >
        <p>
          It is delivered again where the webhook delivers now: its forward URL, as a new attempt
          chain, and its enabled routes, filters evaluated again, as new deliveries.
        </p>
        <ErrorText error={replayError} />
      </Confirm>
    </div>
  );
}

/** What a chain of attempts was: listen chains are a developer's machine, not the destination. */
function chainTitle(trigger: string): string {
  if (trigger === "replay") return "Replay";
  if (trigger === "listen") return "hookbay listen (does not change the status)";
  return "Initial delivery and retries";
}

/** Why a delivery stands as it does; a duplicate's reason links to the event it repeats. */
function DeliveryReason({ delivery }: { delivery: Delivery }) {
  const original =
    delivery.status === "deduplicated"
      ? /^duplicate of (evt_\w+)$/.exec(delivery.reason ?? "")
      : null;
  if (!original) return <>{delivery.reason ?? "—"}</>;
  return (
    <>
      duplicate of{" "}
      <Link to="/events/$eventId" params={{ eventId: original[1] }}>
        {original[1]}
      </Link>
    </>
  );
}
