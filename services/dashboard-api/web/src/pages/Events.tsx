import {
  type InfiniteData,
  useInfiniteQuery,
  useQuery,
  useQueryClient,
} from "@tanstack/react-query";
import { getRouteApi, Link, useNavigate } from "@tanstack/react-router";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useMemo, useRef, useState } from "react";
import { api, call, getJson } from "../api/client";
import { countsQuery } from "../api/queries";
import type { EventPage, EventSummary, StatusFilter } from "../api/types";
import { StatsPanel } from "../components/StatsPanel";
import {
  Button,
  Confirm,
  Empty,
  ErrorText,
  Field,
  inputClass,
  Loading,
  Signature,
  StatusBadge,
  Time,
} from "../components/ui";
import { announce } from "../lib/announce";
import { copyText } from "../lib/clipboard";
import { bytes } from "../lib/format";
import { useShortcuts } from "../lib/keys";

const route = getRouteApi("/_app/webhooks/$name/events");
const ROW_HEIGHT = 44;
const COLUMNS = "grid-cols-[7rem_14rem_16rem_10rem_5rem_5rem_7rem_4rem_8rem]";
const TABS: StatusFilter[] = ["all", "success", "failed", "pending"];

/** The search box holds a request ID (`req_…`: that one request) or text (headers and body). */
function isRequestId(q: string | undefined): boolean {
  return !!q && /^req_[A-Za-z0-9]+$/.test(q);
}

function toLocalInput(iso: string | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function fromLocalInput(value: string): string | undefined {
  return value ? new Date(value).toISOString() : undefined;
}

export type ListFilter = { status: StatusFilter; since?: string; until?: string; q?: string };

/** Whether a live event belongs in the list as filtered (the server's rules, client side). */
export function matches(event: EventSummary, filter: ListFilter): boolean {
  if (filter.status !== "all" && event.status !== filter.status) return false;
  // a text search looks into bodies, which live rows do not carry: the list is searched again
  if (filter.q && (!isRequestId(filter.q) || event.request_id !== filter.q)) return false;
  if (filter.since && event.created_at < filter.since) return false;
  if (filter.until && event.created_at >= filter.until) return false;
  return true;
}

function pageQueryKey(name: string, filter: ListFilter) {
  return ["events", name, filter.status, filter.since, filter.until, filter.q] as const;
}

function Row({ event, selected }: { event: EventSummary; selected: boolean }) {
  const code = event.last_status_code;
  return (
    <a
      href={`/events/${event.id}`}
      data-event-id={event.id}
      aria-current={selected ? "true" : undefined}
      className={`grid h-full ${COLUMNS} items-center gap-2 border-b border-line px-3 text-sm text-fg no-underline hover:bg-hover ${selected ? "bg-hover outline outline-2 outline-accent" : ""}`}
    >
      <span>
        <StatusBadge status={event.status} />
      </span>
      <span>
        <Time iso={event.created_at} />
      </span>
      <span className="truncate pr-8 font-mono">{event.request_id}</span>
      <span className="truncate">{event.content_type ?? "—"}</span>
      <span>{bytes(event.body_size)}</span>
      <span>
        <Signature valid={event.signature_valid} />
      </span>
      <span>
        {code === undefined || code === null ? (event.last_error ?? "—") : code}
        {event.last_latency_ms != null && (
          <span className="text-muted"> · {Math.round(event.last_latency_ms)} ms</span>
        )}
      </span>
      <span>{event.attempt_count ?? "—"}</span>
      <span>{event.next_retry_at ? <Time iso={event.next_retry_at} /> : "—"}</span>
    </a>
  );
}

/** The row's request-id copy button. It sits over the end of the request-id cell but outside
 * the row's link (a button inside a link is invalid HTML and its click would open the event):
 * the cell ends at px-3 + 7rem + gap + 14rem + gap + 16rem (COLUMNS) and leaves it room. */
function CopyRequestId({ event }: { event: EventSummary }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      aria-label={`Copy request ID ${event.request_id}`}
      title="Copy request ID"
      onClick={async () => {
        setDone(await copyText(event.request_id, "Request ID"));
        setTimeout(() => setDone(false), 1500);
      }}
      className="absolute left-[calc(0.75rem+7rem+0.5rem+14rem+0.5rem+16rem)] top-1/2 flex h-7 w-7 -translate-x-full -translate-y-1/2 items-center justify-center rounded border border-line bg-panel text-muted hover:bg-hover hover:text-fg"
    >
      {done ? (
        <span aria-hidden="true">✓</span>
      ) : (
        <svg
          aria-hidden="true"
          viewBox="0 0 16 16"
          className="h-3.5 w-3.5 fill-none stroke-current"
        >
          <rect x="5.5" y="5.5" width="8" height="9" rx="1" />
          <path d="M3.5 10.5h-1v-8a1 1 0 0 1 1-1h7v1" />
        </svg>
      )}
    </button>
  );
}

export function Events() {
  const { name } = route.useParams();
  const search = route.useSearch();
  const navigate = useNavigate({ from: "/webhooks/$name/events" });
  const client = useQueryClient();
  const filter: ListFilter = {
    status: search.status ?? "all",
    since: search.since,
    until: search.until,
    q: search.q,
  };
  const key = pageQueryKey(name, filter);
  const [fresh, setFresh] = useState<EventSummary[]>([]);
  const [live, setLive] = useState<"connecting" | "live" | "off">("connecting");
  const [replayAsk, setReplayAsk] = useState<EventSummary | null>(null);
  const [replayError, setReplayError] = useState<unknown>(null);
  const searchBox = useRef<HTMLInputElement>(null);
  const scroller = useRef<HTMLDivElement>(null);
  const [q, setQ] = useState(filter.q ?? "");
  const statusPushed = useRef(false);

  const counts = useQuery(countsQuery(name, filter.since, filter.until));
  const pages = useInfiniteQuery({
    queryKey: key,
    initialPageParam: null as string | null,
    queryFn: ({ pageParam }) =>
      getJson<EventPage>(`/api/v1/webhooks/${encodeURIComponent(name)}/events`, {
        status: filter.status,
        since: filter.since,
        until: filter.until,
        request_id: isRequestId(filter.q) ? filter.q : undefined,
        q: isRequestId(filter.q) ? undefined : filter.q,
        cursor: pageParam ?? undefined,
        limit: "100",
      }),
    getNextPageParam: (last) => last.next_cursor,
    // while rows are pending and the stream has sent no status change yet (an API without
    // `event: status` messages), look again
    refetchInterval: (query) =>
      !statusPushed.current &&
      query.state.data?.pages.some((p) => p.items.some((e) => e.status === "pending"))
        ? 3000
        : false,
  });
  const rows = useMemo(() => pages.data?.pages.flatMap((p) => p.items) ?? [], [pages.data]);
  const selectedIndex = Math.max(
    -1,
    rows.findIndex((e) => e.id === search.sel),
  );

  // The live tail: new events wait behind the "N new" pill (the viewport never moves);
  // status messages update rows in place.
  const filterRef = useRef(filter);
  filterRef.current = filter;
  useEffect(() => {
    const path = `/api/v1/webhooks/${encodeURIComponent(name)}/events/stream`;
    // The stream's ids are cursors: the browser resumes from the last one by itself while
    // its EventSource lives; one that gave up (CLOSED) is replaced, resuming from it too.
    let lastId = "";
    let source: EventSource;
    let reopen: ReturnType<typeof setTimeout> | undefined;
    const patch = (event: EventSummary) => {
      client.setQueriesData<InfiniteData<EventPage>>({ queryKey: ["events", name] }, (data) =>
        data
          ? {
              ...data,
              pages: data.pages.map((p) => ({
                ...p,
                items: p.items.map((e) => (e.id === event.id ? { ...e, ...event } : e)),
              })),
            }
          : data,
      );
      setFresh((list) => list.map((e) => (e.id === event.id ? { ...e, ...event } : e)));
    };
    const track = (message: Event) => {
      const id = (message as MessageEvent).lastEventId;
      if (id) lastId = id;
    };
    const open = () => {
      const resume = lastId ? `?last_event_id=${encodeURIComponent(lastId)}` : "";
      source = new EventSource(`${path}${resume}`);
      source.onopen = () => setLive("live");
      source.onerror = () => {
        if (source.readyState !== EventSource.CLOSED) return setLive("connecting");
        setLive("off");
        reopen = setTimeout(open, 5000);
      };
      source.addEventListener("event", (message) => {
        track(message);
        const event = JSON.parse((message as MessageEvent).data) as EventSummary;
        if (!matches(event, filterRef.current)) return;
        const known = client
          .getQueryData<InfiniteData<EventPage>>(pageQueryKey(name, filterRef.current))
          ?.pages.some((p) => p.items.some((e) => e.id === event.id));
        if (known) return patch(event); // sent again after a resume: its latest status
        setFresh((list) => (list.some((e) => e.id === event.id) ? list : [event, ...list]));
        announce(`New event ${event.request_id}, ${event.status}`);
      });
      source.addEventListener("status", (message) => {
        track(message);
        statusPushed.current = true;
        patch(JSON.parse((message as MessageEvent).data) as EventSummary);
      });
      source.addEventListener("heartbeat", track);
      source.addEventListener("gap", (message) => {
        track(message);
        // what changed while away may be gone (retention): the list is read again
        client.invalidateQueries({ queryKey: ["events", name] });
      });
    };
    open();
    return () => {
      clearTimeout(reopen);
      source.close();
    };
  }, [name, client]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: held events belong to the filter they came under
  useEffect(() => setFresh([]), [filter.status, filter.since, filter.until, filter.q]);

  function showFresh() {
    client.setQueryData<InfiniteData<EventPage>>(key, (data) =>
      data
        ? {
            ...data,
            pages: [
              { ...data.pages[0], items: [...fresh, ...data.pages[0].items] },
              ...data.pages.slice(1),
            ],
          }
        : data,
    );
    setFresh([]);
    scroller.current?.scrollTo({ top: 0 });
    client.invalidateQueries({ queryKey: ["counts", name] });
  }

  const virtual = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 10,
  });
  const items = virtual.getVirtualItems();
  const lastIndex = items.length ? items[items.length - 1].index : 0;
  useEffect(() => {
    if (lastIndex >= rows.length - 20 && pages.hasNextPage && !pages.isFetchingNextPage)
      pages.fetchNextPage();
  }, [lastIndex, rows.length, pages]);

  const select = (index: number) => {
    const event = rows[Math.min(Math.max(index, 0), rows.length - 1)];
    if (!event) return;
    navigate({ search: (prev) => ({ ...prev, sel: event.id }), replace: true });
    virtual.scrollToIndex(rows.indexOf(event), { align: "auto" });
  };
  const selected = selectedIndex >= 0 ? rows[selectedIndex] : undefined;
  useShortcuts({
    "/": () => searchBox.current?.focus(),
    j: () => select(selectedIndex + 1),
    k: () => select(selectedIndex - 1),
    // biome-ignore lint/correctness/noComponentHookFactories: a key name, not a component
    Enter: () => selected && navigate({ to: "/events/$eventId", params: { eventId: selected.id } }),
    c: () => selected && copyText(selected.request_id, "Request ID"),
    r: () => selected && setReplayAsk(selected),
  });

  const exportHref = `/api/v1/webhooks/${encodeURIComponent(name)}/events/export?${new URLSearchParams(
    Object.entries({
      status: filter.status,
      since: filter.since,
      until: filter.until,
    }).filter((kv): kv is [string, string] => !!kv[1]),
  )}`;

  return (
    <div className="space-y-3">
      <div className="flex flex-wrap items-center gap-3">
        <h1 className="text-2xl font-semibold">
          Events of <span className="font-mono">{name}</span>
        </h1>
        <span className="text-sm text-muted" role="status">
          {live === "live" ? "● Live" : live === "connecting" ? "◌ Connecting…" : "○ Live tail off"}
        </span>
        <div className="ml-auto flex gap-2">
          <Link
            to="/webhooks/$name/routes"
            params={{ name }}
            className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
          >
            Routes
          </Link>
          <Link
            to="/webhooks/$name/replay"
            params={{ name }}
            className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
          >
            Replay failed
          </Link>
          <a
            href={exportHref}
            download
            className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
          >
            Export JSON
          </a>
        </div>
      </div>
      <StatsPanel name={name} window={search.window ?? "24h"} />
      <div role="tablist" aria-label="Status" className="flex gap-1 border-b border-line">
        {TABS.map((status) => (
          <Link
            key={status}
            role="tab"
            aria-selected={filter.status === status}
            from="/webhooks/$name/events"
            search={(prev) => ({
              ...prev,
              status: status === "all" ? undefined : status,
              sel: undefined,
            })}
            className={`-mb-px border-b-2 px-3 py-1.5 text-fg no-underline ${filter.status === status ? "border-accent font-semibold" : "border-transparent"}`}
          >
            {status[0].toUpperCase() + status.slice(1)}
            {counts.data && (
              <span className="text-muted">
                {` (${status === "all" ? counts.data.total : counts.data[status]})`}
              </span>
            )}
          </Link>
        ))}
      </div>
      <form
        className="flex flex-wrap items-end gap-3"
        onSubmit={(e) => {
          e.preventDefault();
          navigate({ search: (prev) => ({ ...prev, q: q.trim() || undefined, sel: undefined }) });
        }}
      >
        <Field label="Request ID or text">
          <input
            ref={searchBox}
            className={`${inputClass} w-64 font-mono`}
            type="search"
            maxLength={200}
            placeholder="req_… or text (press /)"
            value={q}
            onChange={(e) => setQ(e.target.value)}
          />
        </Field>
        <Field label="From (local time)">
          <input
            className={inputClass}
            type="datetime-local"
            value={toLocalInput(filter.since)}
            onChange={(e) =>
              navigate({
                search: (prev) => ({
                  ...prev,
                  since: fromLocalInput(e.target.value),
                  sel: undefined,
                }),
              })
            }
          />
        </Field>
        <Field label="Until (local time)">
          <input
            className={inputClass}
            type="datetime-local"
            value={toLocalInput(filter.until)}
            onChange={(e) =>
              navigate({
                search: (prev) => ({
                  ...prev,
                  until: fromLocalInput(e.target.value),
                  sel: undefined,
                }),
              })
            }
          />
        </Field>
        <Button type="submit">Search</Button>
        {(filter.q || filter.since || filter.until) && (
          <Button
            onClick={() => {
              setQ("");
              navigate({ search: (prev) => ({ status: prev.status, window: prev.window }) });
            }}
          >
            Clear filters
          </Button>
        )}
      </form>
      <div className="relative">
        {fresh.length > 0 && (
          <button
            type="button"
            onClick={showFresh}
            className="absolute left-1/2 top-10 z-10 -translate-x-1/2 rounded-full bg-accent px-4 py-1 text-sm text-on-accent shadow"
          >
            {fresh.length} new {fresh.length === 1 ? "event" : "events"}: show
          </button>
        )}
        {pages.isPending ? (
          <Loading what="events" />
        ) : pages.error ? (
          <ErrorText error={pages.error} />
        ) : rows.length === 0 && pages.hasNextPage ? (
          <Empty>
            No match among the newest events searched so far.{" "}
            <Button onClick={() => pages.fetchNextPage()} disabled={pages.isFetchingNextPage}>
              {pages.isFetchingNextPage ? "Searching…" : "Search older events"}
            </Button>
          </Empty>
        ) : rows.length === 0 ? (
          <Empty>No events match. Send one to the webhook's URL, or change the filters.</Empty>
        ) : (
          <div className="overflow-x-auto rounded-lg border border-line bg-panel">
            <div
              aria-hidden="true"
              className={`grid ${COLUMNS} gap-2 border-b border-line px-3 py-2 text-xs font-semibold text-muted`}
            >
              {[
                "Status",
                "Received",
                "Request ID",
                "Content type",
                "Size",
                "Signature",
                "Last attempt",
                "Attempts",
                "Next retry",
              ].map((h) => (
                <span key={h}>{h}</span>
              ))}
            </div>
            <div
              ref={scroller}
              className="h-[calc(100vh-22rem)] min-h-64 overflow-y-auto"
              data-testid="event-scroller"
            >
              <ul
                aria-label={`Events of ${name}`}
                className="relative"
                style={{ height: virtual.getTotalSize() }}
              >
                {items.map((item) => (
                  <li
                    key={item.key}
                    aria-posinset={item.index + 1}
                    aria-setsize={pages.hasNextPage ? -1 : rows.length}
                    className="absolute left-0 w-full"
                    style={{ height: item.size, transform: `translateY(${item.start}px)` }}
                  >
                    <Row event={rows[item.index]} selected={item.index === selectedIndex} />
                    <CopyRequestId event={rows[item.index]} />
                  </li>
                ))}
              </ul>
            </div>
            {pages.isFetchingNextPage && <Loading what="older events" />}
          </div>
        )}
      </div>
      <Confirm
        open={replayAsk !== null}
        title="Replay this event?"
        confirmLabel="Replay"
        onClose={() => {
          setReplayAsk(null);
          setReplayError(null);
        }}
        onConfirm={async () => {
          if (!replayAsk) return;
          try {
            await call(() =>
              api.POST("/api/v1/events/{event_id}/replay", {
                params: { path: { event_id: replayAsk.id } },
              }),
            );
            announce(`Replay of ${replayAsk.request_id} queued`);
            setReplayAsk(null);
          } catch (exc) {
            setReplayError(exc);
          }
        }}
      >
        <p>
          <span className="font-mono">{replayAsk?.request_id}</span> is delivered again to the
          webhook's current forward URL.
        </p>
        <ErrorText error={replayError} />
      </Confirm>
    </div>
  );
}
