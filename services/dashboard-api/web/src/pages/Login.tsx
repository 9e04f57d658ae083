import { useQueryClient } from "@tanstack/react-query";
import { getRouteApi, useNavigate } from "@tanstack/react-router";
import { useState } from "react";
import { ApiError, api, call, setCsrfToken } from "../api/client";
import { Button, ErrorText, Field, inputClass } from "../components/ui";

const route = getRouteApi("/login");

/** Only a path of this app: never an absolute URL someone put into ?redirect=. */
export function safeRedirect(target: string | undefined): string {
  return target?.startsWith("/") && !target.startsWith("//") ? target : "/";
}

export function Login() {
  const { redirect } = route.useSearch();
  const navigate = useNavigate();
  const client = useQueryClient();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: React.FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const me = await call(() => api.POST("/api/v1/auth/login", { body: { username, password } }));
      setCsrfToken(me.csrf_token ?? null);
      client.setQueryData(["me"], me);
      navigate({ href: safeRedirect(redirect), replace: true });
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  }

  let message: React.ReactNode = null;
  if (error instanceof ApiError && error.status === 429) {
    message = (
      <p role="alert" className="text-bad text-sm">
        Too many attempts: try again in {error.retryAfter ?? 60} s.
      </p>
    );
  } else if (error instanceof ApiError && error.status === 401) {
    message = (
      <p role="alert" className="text-bad text-sm">
        Wrong username or password.
      </p>
    );
  } else if (error) {
    message = <ErrorText error={error} />;
  }

  return (
    <div className="mx-auto mt-24 max-w-sm rounded-lg border border-line bg-panel p-6">
      <h1 className="mb-4 text-xl font-semibold">Sign in to hookbay</h1>
      <form onSubmit={submit} className="flex flex-col gap-3" noValidate>
        <Field label="Username">
          <input
            className={inputClass}
            autoComplete="username"
            value={username}
            onChange={(e) => setUsername(e.target.value)}
            required
            aria-invalid={error instanceof ApiError && error.status === 401}
          />
        </Field>
        <Field label="Password">
          <input
            className={inputClass}
            type="password"
            autoComplete="current-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            required
          />
        </Field>
        {message}
        <Button type="submit" variant="primary" disabled={busy || !username || !password}>
          {busy ? "Signing in…" : "Sign in"}
        </Button>
      </form>
    </div>
  );
}
