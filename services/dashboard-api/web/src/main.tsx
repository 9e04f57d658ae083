import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { RouterProvider } from "@tanstack/react-router";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { ApiError, setUnauthorizedHandler } from "./api/client";
import { makeRouter } from "./router";
import "./styles.css";

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // an answer of the API is final; only an unreachable API is worth asking again
      retry: (count, error) => error instanceof ApiError && error.status === 0 && count < 20,
      retryDelay: (count) => Math.min(1000 * 2 ** count, 10_000),
    },
  },
});
const router = makeRouter(queryClient);

// A session that expires mid-use: back to the login page, then back here.
setUnauthorizedHandler(() => {
  const here = router.state.location;
  if (here.pathname === "/login") return;
  queryClient.clear();
  router.navigate({ to: "/login", search: { redirect: here.href } });
});

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </StrictMode>,
  );
}
