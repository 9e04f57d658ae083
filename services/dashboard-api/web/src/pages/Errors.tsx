import { type ErrorComponentProps, Link } from "@tanstack/react-router";
import { ApiError } from "../api/client";
import { Banner } from "../components/Layout";
import { Button } from "../components/ui";

export function NotFound() {
  return (
    <div className="mx-auto mt-16 max-w-lg text-center">
      <h1 className="mb-2 text-2xl font-semibold">Page not found</h1>
      <p className="mb-4 text-muted">There is nothing at this address.</p>
      <Link to="/">Go to the overview</Link>
    </div>
  );
}

export function Forbidden() {
  return (
    <div className="mx-auto mt-16 max-w-lg text-center">
      <h1 className="mb-2 text-2xl font-semibold">Forbidden (403)</h1>
      <p className="mb-4 text-muted">This page is for administrators.</p>
      <Link to="/">Go to the overview</Link>
    </div>
  );
}

/** The error boundary. It replaces every layout, so it shows the "API unreachable" banner
 * itself: an API that cannot be reached (status 0) is the usual cause, said in words rather
 * than as the browser's "Failed to fetch". */
export function ErrorPage({ error, reset }: ErrorComponentProps) {
  const unreachable = error instanceof ApiError && error.status === 0;
  return (
    <>
      <Banner />
      <main id="main">
        <div role="alert" className="mx-auto mt-16 max-w-lg text-center">
          <h1 className="mb-2 text-2xl font-semibold">Something went wrong</h1>
          <p className="mb-4 break-words text-muted">
            {unreachable
              ? "The hookbay API could not be reached. Try again in a moment."
              : error instanceof Error
                ? error.message
                : String(error)}
          </p>
          <Button onClick={reset}>Try again</Button>
        </div>
      </main>
    </>
  );
}
