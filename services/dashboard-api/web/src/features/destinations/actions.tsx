import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useState } from "react";
import { ApiError, api, call } from "../../api/client";
import type { Destination } from "../../api/types";
import { Button, Confirm, ErrorText } from "../../components/ui";
import { announce } from "../../lib/announce";
import { forwardWebhook } from "./api";

type Ask = "pause" | "resume" | "delete" | "retry" | null;

/** Retry every failed delivery to `dest`, call after call while the server says where to go on;
 * how many were sent again. */
async function retryFailed(dest: string): Promise<number> {
  let after: string | null = null;
  let retried = 0;
  for (let page = 0; page < 10_000; page++) {
    const done = await retryPage(dest, after);
    retried += done.retried;
    if (done.next === null || done.next === undefined) break;
    after = done.next;
  }
  return retried;
}

/** One call: at most 1,000 deliveries, from `after` (the previous call's `next`). */
function retryPage(dest: string, after: string | null) {
  return call(() =>
    api.POST("/api/v1/destinations/{dest}/retry-failed", {
      params: { path: { dest } },
      body: after === null ? {} : { after },
    }),
  );
}

/** The routes a 409 names (`webhook/route`), when a destination is still in use. */
function routesInUse(error: unknown): string[] | null {
  if (!(error instanceof ApiError) || error.status !== 409) return null;
  const routes = error.body.routes;
  return Array.isArray(routes) ? routes.map(String) : null;
}

function InUse({ routes }: { routes: string[] }) {
  return (
    <div role="alert" className="space-y-1 text-sm text-bad">
      <p>In use by routes: delete them or point them at another destination first.</p>
      <ul className="list-inside list-disc">
        {routes.map((path) => {
          const [webhook, route] = path.split("/");
          return (
            <li key={path}>
              <Link to="/webhooks/$name/routes" params={{ name: webhook }}>
                {webhook} / {route}
              </Link>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

/** Pause or resume (asking first), and delete (asking first; a 409 names the routes using it). */
export function DestinationActions({
  destination,
  onDeleted,
}: {
  destination: Destination;
  onDeleted?: () => void;
}) {
  const client = useQueryClient();
  const [ask, setAsk] = useState<Ask>(null);
  const dest = destination.name;
  const path = { params: { path: { dest } } };
  const act = useMutation({
    mutationFn: async (kind: "pause" | "resume" | "delete") => {
      if (kind === "pause") await call(() => api.POST("/api/v1/destinations/{dest}/pause", path));
      else if (kind === "resume")
        await call(() => api.POST("/api/v1/destinations/{dest}/resume", path));
      else await call(() => api.DELETE("/api/v1/destinations/{dest}", path));
      return kind;
    },
    onSuccess: (kind) => {
      setAsk(null);
      announce(
        kind === "pause"
          ? `Destination ${dest} paused`
          : kind === "resume"
            ? `Destination ${dest} resumed`
            : `Destination ${dest} deleted`,
      );
      if (kind === "delete") {
        client.removeQueries({ queryKey: ["destinations", dest] });
        onDeleted?.();
      }
      client.invalidateQueries({ queryKey: ["destinations"] });
    },
  });
  const retry = useMutation({
    mutationFn: () => retryFailed(dest),
    onSuccess: (retried) => {
      setAsk(null);
      announce(
        `${retried} failed ${retried === 1 ? "delivery" : "deliveries"} to ${dest} sent again`,
      );
      client.invalidateQueries({ queryKey: ["events"] });
    },
  });
  const active = destination.state === "active";
  const inUse = routesInUse(act.error);
  return (
    <div className="flex flex-wrap justify-end gap-2">
      {active ? (
        <Button onClick={() => setAsk("pause")} aria-label={`Pause ${dest}`}>
          Pause
        </Button>
      ) : (
        <Button onClick={() => setAsk("resume")} aria-label={`Resume ${dest}`}>
          {destination.state === "disabled" ? "Re-enable" : "Resume"}
        </Button>
      )}
      <Button onClick={() => setAsk("retry")} aria-label={`Retry failed deliveries to ${dest}`}>
        Retry failed
      </Button>
      {forwardWebhook(dest) === null && (
        <Button variant="danger" onClick={() => setAsk("delete")} aria-label={`Delete ${dest}`}>
          Delete
        </Button>
      )}
      <Confirm
        open={ask === "pause" || ask === "resume"}
        title={ask === "pause" ? `Pause ${dest}?` : `Resume ${dest}?`}
        confirmLabel={ask === "pause" ? "Pause destination" : "Resume destination"}
        busy={act.isPending}
        onConfirm={() => act.mutate(ask === "pause" ? "pause" : "resume")}
        onClose={() => {
          setAsk(null);
          act.reset();
        }}
      >
        <p>
          {ask === "pause"
            ? "It gets no attempts while paused. Its deliveries are held, never discarded, until you resume it."
            : "Held deliveries go out in arrival order, at its rate limit and concurrency."}
        </p>
        <ErrorText error={act.error} />
      </Confirm>
      <Confirm
        open={ask === "retry"}
        title={`Retry failed deliveries to ${dest}?`}
        confirmLabel="Retry failed deliveries"
        busy={retry.isPending}
        onConfirm={() => retry.mutate()}
        onClose={() => {
          setAsk(null);
          retry.reset();
        }}
      >
        <p>
          Every delivery to {dest} that failed is sent again, to the destination as it is now
          {active ? "" : " (held until you resume it)"}; other deliveries of those events stay as
          they are.
        </p>
        <ErrorText error={retry.error} />
      </Confirm>
      <Confirm
        open={ask === "delete"}
        title={`Delete ${dest}?`}
        confirmLabel="Delete destination"
        danger
        busy={act.isPending}
        disabled={inUse !== null}
        onConfirm={() => act.mutate("delete")}
        onClose={() => {
          setAsk(null);
          act.reset();
        }}
      >
        <p>A destination used by routes cannot be deleted.</p>
        {inUse ? <InUse routes={inUse} /> : <ErrorText error={act.error} />}
      </Confirm>
    </div>
  );
}
