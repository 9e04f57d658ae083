import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "./schema";

/** An API answer that is not 2xx: the server's `{"error", "message"}` and the status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly retryAfter: number | null = null,
    /** The whole JSON answer (a 422's `detail`, a 409's `routes`, …). */
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** One refused field of a 422: where (`loc` without its leading "body"), why, and for a
 * filter the JSON pointer into it. */
export type FieldProblem = { loc: (string | number)[]; msg: string; pointer?: string };

export function fieldProblems(error: unknown): FieldProblem[] {
  if (!(error instanceof ApiError) || error.status !== 422) return [];
  const detail = error.body.detail;
  if (!Array.isArray(detail)) return [];
  return detail.flatMap((d): FieldProblem[] => {
    if (d === null || typeof d !== "object" || !Array.isArray(d.loc)) return [];
    const loc = d.loc[0] === "body" ? d.loc.slice(1) : d.loc;
    return [{ loc, msg: String(d.msg ?? ""), pointer: d.pointer ?? undefined }];
  });
}

/** The message of the first refusal at or under `path` (e.g. "url", "rate_limit"). */
export function fieldProblem(error: unknown, ...path: string[]): string | null {
  const found = fieldProblems(error).find((p) => path.every((part, i) => p.loc[i] === part));
  return found ? found.msg : null;
}

// The session's CSRF token lives in memory only (never web storage): GET /me hands it out again.
let csrfToken: string | null = null;
export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

type Listener = () => void;
const apiDown = { value: false, listeners: new Set<Listener>() };
export const apiHealth = {
  get: () => apiDown.value,
  subscribe(listener: Listener): () => void {
    apiDown.listeners.add(listener);
    return () => apiDown.listeners.delete(listener);
  },
  set(down: boolean): void {
    if (apiDown.value !== down) {
      apiDown.value = down;
      for (const listener of apiDown.listeners) listener();
    }
  },
};

let onUnauthorized: () => void = () => {};
/** Called when a request made with a session answers 401: the session expired. */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

const csrf: Middleware = {
  onRequest({ request }) {
    if (!["GET", "HEAD", "OPTIONS"].includes(request.method) && csrfToken) {
      request.headers.set("X-CSRF-Token", csrfToken);
    }
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: "", credentials: "same-origin" });
api.use(csrf);

function toError(response: Response, error: unknown): ApiError {
  // openapi-fetch has read the body already: `error` is the parsed JSON (or its text)
  const body = (error !== null && typeof error === "object" ? error : {}) as {
    error?: string;
    message?: string;
    retryAfter?: number;
  };
  const header = response.headers.get("Retry-After");
  const retryAfter = header ? Number(header) : (body.retryAfter ?? null);
  return new ApiError(
    response.status,
    body.error ?? response.statusText,
    body.message ?? `HTTP ${response.status}`,
    retryAfter,
    body as Record<string, unknown>,
  );
}

/** Every call of the screens goes through here: the API's error as an ApiError, the
 * "API unreachable" banner on network failures and gateway errors, the session-expiry hook. */
export async function call<T>(
  run: () => Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await run();
  } catch (exc) {
    apiHealth.set(true);
    throw new ApiError(0, "API unreachable", String(exc));
  }
  const { response } = result;
  apiHealth.set([502, 503, 504].includes(response.status) && !response.headers.has("x-request-id"));
  if (response.ok) return result.data as T;
  const error = toError(response, result.error);
  if (response.status === 401 && !response.url.endsWith("/api/v1/auth/login")) onUnauthorized();
  throw error;
}

/** A GET of an endpoint the generated types do not know yet (added by a newer API). */
export async function getJson<T>(
  path: string,
  query: Record<string, string | undefined> = {},
): Promise<T> {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value) params.set(key, value);
  const qs = params.toString();
  return call<T>(async () => {
    const response = await fetch(qs ? `${path}?${qs}` : path, { credentials: "same-origin" });
    if (response.ok) return { data: (await response.json()) as T, response };
    return { error: await response.json().catch(() => null), response };
  });
}
