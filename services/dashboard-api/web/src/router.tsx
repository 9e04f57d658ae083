import type { QueryClient } from "@tanstack/react-query";
import {
  createRootRouteWithContext,
  createRoute,
  createRouter,
  lazyRouteComponent,
  redirect,
} from "@tanstack/react-router";
import { ApiError } from "./api/client";
import { meQuery } from "./api/queries";
import type { IssueStatus, StatusFilter } from "./api/types";
import { BareLayout, Layout } from "./components/Layout";
import { Admin } from "./pages/Admin";
import { BulkReplay } from "./pages/BulkReplay";
import { ErrorPage, NotFound } from "./pages/Errors";
import { EventDetail } from "./pages/EventDetail";
import { Events } from "./pages/Events";
import { Login } from "./pages/Login";
import { Overview } from "./pages/Overview";
import { Tokens } from "./pages/Tokens";
import { Webhooks } from "./pages/Webhooks";

const text = (value: unknown): string | undefined =>
  typeof value === "string" && value ? value : undefined;
const isoTime = (value: unknown): string | undefined => {
  const s = text(value);
  return s && !Number.isNaN(Date.parse(s)) ? s : undefined;
};

const rootRoute = createRootRouteWithContext<{ queryClient: QueryClient }>()({
  notFoundComponent: NotFound,
  errorComponent: ErrorPage,
});

const loginRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: "login",
  validateSearch: (s: Record<string, unknown>): { redirect?: string } => ({
    redirect: text(s.redirect),
  }),
  component: Login,
});
const bare = createRoute({ getParentRoute: () => rootRoute, id: "_bare", component: BareLayout });

/** Every screen but the login: the session is checked first; without one, the login page
 * with the address to come back to. */
const appRoute = createRoute({
  getParentRoute: () => rootRoute,
  id: "_app",
  component: Layout,
  beforeLoad: async ({ context, location }) => {
    try {
      await context.queryClient.ensureQueryData(meQuery);
    } catch (exc) {
      if (exc instanceof ApiError && exc.status === 401) {
        throw redirect({ to: "/login", search: { redirect: location.href } });
      }
      throw exc;
    }
  },
});

const overviewRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/",
  component: Overview,
});
const webhooksRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "webhooks",
  component: Webhooks,
});
export type EventsSearch = {
  status?: StatusFilter;
  /** The stats panel's window; 24 h when absent. */
  window?: "1h" | "7d";
  since?: string;
  until?: string;
  q?: string;
  sel?: string;
};
const eventsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "webhooks/$name/events",
  validateSearch: (s: Record<string, unknown>): EventsSearch => ({
    status:
      s.status === "success" || s.status === "failed" || s.status === "pending"
        ? s.status
        : undefined,
    window: s.window === "1h" || s.window === "7d" ? s.window : undefined,
    since: isoTime(s.since),
    until: isoTime(s.until),
    q: text(s.q),
    sel: text(s.sel),
  }),
  component: Events,
});
const replayRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "webhooks/$name/replay",
  validateSearch: (s: Record<string, unknown>): { job?: string } => ({ job: text(s.job) }),
  component: BulkReplay,
});
const eventRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "events/$eventId",
  validateSearch: (s: Record<string, unknown>): { tab?: string; hf?: string } => ({
    tab: ["pretty", "raw", "hex"].includes(String(s.tab)) ? String(s.tab) : undefined,
    hf: text(s.hf),
  }),
  component: EventDetail,
});
const routesRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "webhooks/$name/routes",
  // the gateway's screens load on first visit: the initial bundle stays within its budget
  component: lazyRouteComponent(() => import("./features/routes/Routes"), "Routes"),
});
const destinationsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "destinations",
  component: lazyRouteComponent(
    () => import("./features/destinations/Destinations"),
    "Destinations",
  ),
});
const destinationRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "destinations/$dest",
  component: lazyRouteComponent(
    () => import("./features/destinations/DestinationDetail"),
    "DestinationDetail",
  ),
});
const issuesRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "issues",
  validateSearch: (s: Record<string, unknown>): { status?: IssueStatus } => ({
    status: ["open", "acknowledged", "resolved", "ignored"].includes(String(s.status))
      ? (s.status as IssueStatus)
      : undefined,
  }),
  component: lazyRouteComponent(() => import("./features/issues/Issues"), "Issues"),
});
const channelsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "alert-channels",
  component: lazyRouteComponent(() => import("./features/alerts/AlertChannels"), "AlertChannels"),
});
const transformationsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "transformations",
  component: lazyRouteComponent(
    () => import("./features/transformations/Transformations"),
    "Transformations",
  ),
});
const transformationRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "transformations/$trf",
  component: lazyRouteComponent(
    () => import("./features/transformations/TransformationDetail"),
    "TransformationDetail",
  ),
});
const tokensRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "tokens",
  component: Tokens,
});
const adminRoute = createRoute({ getParentRoute: () => appRoute, path: "admin", component: Admin });

const routeTree = rootRoute.addChildren([
  bare.addChildren([loginRoute]),
  appRoute.addChildren([
    overviewRoute,
    webhooksRoute,
    eventsRoute,
    replayRoute,
    eventRoute,
    routesRoute,
    destinationsRoute,
    destinationRoute,
    issuesRoute,
    channelsRoute,
    transformationsRoute,
    transformationRoute,
    tokensRoute,
    adminRoute,
  ]),
]);

export function makeRouter(queryClient: QueryClient) {
  return createRouter({
    routeTree,
    context: { queryClient },
    defaultPreload: false,
    scrollRestoration: true,
  });
}

declare module "@tanstack/react-router" {
  interface Register {
    router: ReturnType<typeof makeRouter>;
  }
}
