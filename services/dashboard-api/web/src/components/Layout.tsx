import { useQuery } from "@tanstack/react-query";
import { Link, Outlet, useNavigate, useRouter } from "@tanstack/react-router";
import { useEffect, useState, useSyncExternalStore } from "react";
import { api, apiHealth, call, setCsrfToken } from "../api/client";
import { meQuery } from "../api/queries";
import { onAnnounce } from "../lib/announce";
import { useShortcuts } from "../lib/keys";
import { applyTheme, followSystem, type ThemeChoice, themeChoice } from "../lib/theme";
import { Button, Modal } from "./ui";

function LiveRegion() {
  const [message, setMessage] = useState("");
  useEffect(
    () => onAnnounce((text) => setMessage((old) => (old === text ? `${text}\u00a0` : text))),
    [],
  );
  return (
    <div aria-live="polite" role="status" className="sr-only" data-testid="live-region">
      {message}
    </div>
  );
}

/** "API unreachable", while the last API call found no API (shown by every layout and the
 * error page). */
export function Banner() {
  const down = useSyncExternalStore(apiHealth.subscribe, apiHealth.get);
  if (!down) return null;
  return (
    <div role="alert" className="border-b border-bad bg-panel px-4 py-2 text-bad">
      API unreachable: the dashboard cannot reach the hookbay API. It keeps retrying.
    </div>
  );
}

function ThemeSwitch() {
  const [choice, setChoice] = useState<ThemeChoice>(themeChoice);
  useEffect(followSystem, []);
  const next: Record<ThemeChoice, ThemeChoice> = { system: "light", light: "dark", dark: "system" };
  return (
    <Button
      aria-label={`Theme: ${choice}. Switch to ${next[choice]}`}
      onClick={() => {
        applyTheme(next[choice]);
        setChoice(next[choice]);
      }}
    >
      Theme: {choice}
    </Button>
  );
}

const SHORTCUTS: [string, string][] = [
  ["/", "Search (request id)"],
  ["j / k", "Next / previous event"],
  ["Enter", "Open the selected event"],
  ["Esc", "Back to the list"],
  ["r", "Replay (asks first)"],
  ["c", "Copy the request ID"],
  ["?", "This help"],
];

export function Layout() {
  const { data: me } = useQuery(meQuery);
  const navigate = useNavigate();
  const router = useRouter();
  const [help, setHelp] = useState(false);
  useShortcuts({ "?": () => setHelp(true) });
  const nav = [
    { to: "/", label: "Overview" },
    { to: "/webhooks", label: "Webhooks" },
    { to: "/destinations", label: "Destinations" },
    { to: "/transformations", label: "Transformations" },
    { to: "/issues", label: "Issues" },
    { to: "/alert-channels", label: "Alerts" },
    { to: "/tokens", label: "API tokens" },
    ...(me?.role === "admin" ? [{ to: "/admin", label: "Admin" }] : []),
  ] as const;
  return (
    <div className="min-h-screen">
      <a href="#main" className="sr-only focus:not-sr-only focus:absolute focus:p-2">
        Skip to content
      </a>
      <Banner />
      <header className="flex flex-wrap items-center gap-4 border-b border-line bg-panel px-4 py-2">
        <Link to="/" className="text-lg font-bold text-fg no-underline">
          hookbay
        </Link>
        <nav aria-label="Main" className="flex gap-1">
          {nav.map((item) => (
            <Link
              key={item.to}
              to={item.to}
              className="rounded px-2 py-1 text-fg no-underline hover:bg-hover"
              activeProps={{ "aria-current": "page", className: "bg-hover font-semibold" }}
              activeOptions={{ exact: item.to === "/" }}
            >
              {item.label}
            </Link>
          ))}
        </nav>
        <div className="ml-auto flex items-center gap-2 text-sm">
          <Button aria-label="Keyboard shortcuts" onClick={() => setHelp(true)}>
            ?
          </Button>
          <ThemeSwitch />
          {me && <span className="text-muted">{me.username}</span>}
          <Button
            onClick={async () => {
              await call(() => api.POST("/api/v1/auth/logout")).catch(() => undefined);
              setCsrfToken(null);
              router.options.context.queryClient.clear();
              navigate({ to: "/login", search: {} });
            }}
          >
            Sign out
          </Button>
        </div>
      </header>
      <main id="main" className="mx-auto max-w-7xl p-4">
        <Outlet />
      </main>
      <LiveRegion />
      <Modal open={help} title="Keyboard shortcuts" onClose={() => setHelp(false)}>
        <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1">
          {SHORTCUTS.map(([key, what]) => (
            <div key={key} className="contents">
              <dt>
                <kbd className="rounded border border-line px-1 font-mono">{key}</kbd>
              </dt>
              <dd>{what}</dd>
            </div>
          ))}
        </dl>
        <p className="mt-3 text-sm text-muted">Shortcuts do nothing while you type in a field.</p>
        <div className="mt-4 flex justify-end">
          <Button onClick={() => setHelp(false)}>Close</Button>
        </div>
      </Modal>
    </div>
  );
}

export function BareLayout() {
  return (
    <>
      <Banner />
      <main id="main">
        <Outlet />
      </main>
      <LiveRegion />
    </>
  );
}
