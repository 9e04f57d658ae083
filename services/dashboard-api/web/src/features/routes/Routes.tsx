import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { getRouteApi, Link } from "@tanstack/react-router";
import { useState } from "react";
import { ApiError, api, call } from "../../api/client";
import type { Route } from "../../api/types";
import { Button, Confirm, Empty, ErrorText, Loading } from "../../components/ui";
import { announce } from "../../lib/announce";
import { NotFound } from "../../pages/Errors";
import { FORWARD_ROUTE } from "../destinations/api";
import { filterSummary, routesQuery } from "./api";
import { dedupeSummary } from "./DedupeFields";
import { formatDelay } from "./delay";
import { RouteEditor } from "./RouteEditor";

const screen = getRouteApi("/_app/webhooks/$name/routes");

type Change = { route: Route; body: { position?: number; enabled?: boolean } | null };

/** A webhook's routes in their order: move, enable / disable, edit (with the filter editor and
 * the dry run), delete; a new route. */
export function Routes() {
  const { name } = screen.useParams();
  const client = useQueryClient();
  const routes = useQuery(routesQuery(name));
  const [editing, setEditing] = useState<Route | "new" | null>(null);
  const [deleting, setDeleting] = useState<Route | null>(null);
  const change = useMutation({
    mutationFn: async ({ route, body }: Change) => {
      const path = { params: { path: { name, route: route.name } } };
      if (body === null) {
        await call(() => api.DELETE("/api/v1/webhooks/{name}/routes/{route}", path));
        return `Route ${route.name} deleted`;
      }
      const saved = await call(() =>
        api.PATCH("/api/v1/webhooks/{name}/routes/{route}", { ...path, body }),
      );
      if (body.position !== undefined) return `Route ${saved.name} moved to ${saved.position + 1}`;
      return `Route ${saved.name} ${saved.enabled ? "enabled" : "disabled"}`;
    },
    onSuccess: (message) => {
      client.invalidateQueries({ queryKey: ["routes", name] });
      announce(message);
      setDeleting(null);
    },
  });
  if (routes.error instanceof ApiError && routes.error.status === 404) return <NotFound />;
  const list = routes.data ?? [];
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="flex gap-3 text-sm">
        <Link to="/webhooks">← Webhooks</Link>
        <Link to="/webhooks/$name/events" params={{ name }}>
          Events of {name}
        </Link>
      </nav>
      <div className="flex flex-wrap items-center gap-3">
        <h1 className="text-2xl font-semibold">
          Routes of <span className="font-mono">{name}</span>
        </h1>
        <div className="ml-auto flex gap-2">
          <Link
            to="/destinations"
            className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
          >
            Destinations
          </Link>
          <Button variant="primary" onClick={() => setEditing("new")} disabled={editing !== null}>
            New route
          </Button>
        </div>
      </div>
      <p className="text-sm text-muted">
        In order: each event goes to every enabled route whose filter it matches, each to its
        destination.
      </p>
      {routes.isPending ? (
        <Loading what="routes" />
      ) : routes.error ? (
        <ErrorText error={routes.error} />
      ) : list.length === 0 ? (
        <Empty>No routes yet.</Empty>
      ) : (
        <table className="w-full rounded-lg border border-line bg-panel text-sm">
          <caption className="sr-only">Routes of {name}, in order</caption>
          <thead>
            <tr className="text-left">
              <th className="p-2">#</th>
              <th className="p-2">Name</th>
              <th className="p-2">Destination</th>
              <th className="p-2">Enabled</th>
              <th className="p-2">Filter</th>
              <th className="p-2">Transformation</th>
              <th className="p-2">Deduplication</th>
              <th className="p-2">Delay</th>
              <th className="p-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((r, i) => (
              <tr key={r.id} className="border-t border-line align-top">
                <td className="p-2">{r.position + 1}</td>
                <td className="p-2 font-medium">{r.name}</td>
                <td className="p-2">
                  <Link to="/destinations/$dest" params={{ dest: r.destination }}>
                    {r.destination}
                  </Link>
                </td>
                <td className="whitespace-nowrap p-2">
                  {r.enabled ? (
                    <span className="text-ok">
                      <span aria-hidden="true">● </span>Enabled
                    </span>
                  ) : (
                    <span className="text-muted">
                      <span aria-hidden="true">○ </span>Disabled
                    </span>
                  )}
                </td>
                <td
                  className="max-w-md break-all p-2 font-mono text-xs"
                  title={filterSummary(r.filter, 2000)}
                >
                  {filterSummary(r.filter)}
                </td>
                <td className="p-2">{r.transform ?? <span className="text-muted">—</span>}</td>
                <td className="p-2 font-mono text-xs">
                  {r.dedupe ? dedupeSummary(r.dedupe) : <span className="text-muted">—</span>}
                </td>
                <td className="p-2">
                  {formatDelay(r.delay_s) || <span className="text-muted">—</span>}
                </td>
                <td className="p-2">
                  <div className="flex flex-wrap justify-end gap-1">
                    <Button
                      aria-label={`Move ${r.name} up`}
                      disabled={i === 0 || change.isPending}
                      onClick={() => change.mutate({ route: r, body: { position: i - 1 } })}
                    >
                      ↑
                    </Button>
                    <Button
                      aria-label={`Move ${r.name} down`}
                      disabled={i === list.length - 1 || change.isPending}
                      onClick={() => change.mutate({ route: r, body: { position: i + 1 } })}
                    >
                      ↓
                    </Button>
                    {r.name === FORWARD_ROUTE ? (
                      <span className="self-center text-xs text-muted">
                        the webhook's forward URL: change it on the webhook
                      </span>
                    ) : (
                      <>
                        <Button
                          aria-label={`${r.enabled ? "Disable" : "Enable"} ${r.name}`}
                          disabled={change.isPending}
                          onClick={() => change.mutate({ route: r, body: { enabled: !r.enabled } })}
                        >
                          {r.enabled ? "Disable" : "Enable"}
                        </Button>
                        <Button
                          aria-label={`Edit ${r.name}`}
                          disabled={editing !== null}
                          onClick={() => setEditing(r)}
                        >
                          Edit
                        </Button>
                        <Button
                          variant="danger"
                          aria-label={`Delete ${r.name}`}
                          onClick={() => setDeleting(r)}
                        >
                          Delete
                        </Button>
                      </>
                    )}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deleting === null && <ErrorText error={change.error} />}
      {editing !== null && (
        <RouteEditor
          key={editing === "new" ? "new" : editing.id}
          webhook={name}
          route={editing === "new" ? null : editing}
          onClose={() => setEditing(null)}
        />
      )}
      <Confirm
        open={deleting !== null}
        title={`Delete route ${deleting?.name}?`}
        confirmLabel="Delete route"
        danger
        busy={change.isPending}
        onConfirm={() => deleting && change.mutate({ route: deleting, body: null })}
        onClose={() => setDeleting(null)}
      >
        <p>
          Events of {name} stop going to {deleting?.destination} through this route.
        </p>
        <ErrorText error={change.error} />
      </Confirm>
    </div>
  );
}
