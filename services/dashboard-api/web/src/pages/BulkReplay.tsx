import { useMutation, useQuery } from "@tanstack/react-query";
import { getRouteApi, Link, useNavigate } from "@tanstack/react-router";
import { api, call } from "../api/client";
import { Button, ErrorText, Loading } from "../components/ui";

const route = getRouteApi("/_app/webhooks/$name/replay");

function Progress({ name, jobId }: { name: string; jobId: string }) {
  const job = useQuery({
    queryKey: ["replay-job", name, jobId],
    queryFn: () =>
      call(() =>
        api.GET("/api/v1/webhooks/{name}/replays/{job_id}", {
          params: { path: { name, job_id: jobId } },
        }),
      ),
    refetchInterval: (q) => (q.state.data?.status === "running" ? 1000 : false),
  });
  if (job.isPending) return <Loading what="the replay job" />;
  if (job.error) return <ErrorText error={job.error} />;
  const { status, published, total, error } = job.data;
  return (
    <div className="space-y-3">
      <p>
        Job <code className="font-mono">{jobId}</code>: <strong>{status}</strong>
      </p>
      <label className="flex flex-col gap-1">
        <span>
          Published {published} of {total}
        </span>
        <progress max={Math.max(total, published, 1)} value={published} className="w-full" />
      </label>
      {error && (
        <p role="alert" className="text-bad">
          The replay failed: {error}
        </p>
      )}
      {status !== "running" && (
        <p role="status">
          {status === "done" ? `Done: ${published} events queued for delivery again.` : "Stopped."}
        </p>
      )}
    </div>
  );
}

export function BulkReplay() {
  const { name } = route.useParams();
  const { job } = route.useSearch();
  const navigate = useNavigate({ from: "/webhooks/$name/replay" });
  const preview = useQuery({
    queryKey: ["replay-preview", name],
    queryFn: () =>
      call(() =>
        api.GET("/api/v1/webhooks/{name}/events/replay/preview", { params: { path: { name } } }),
      ),
    enabled: !job,
  });
  const start = useMutation({
    mutationFn: () =>
      call(() => api.POST("/api/v1/webhooks/{name}/events/replay", { params: { path: { name } } })),
    onSuccess: (started) => navigate({ search: { job: started.id }, replace: true }),
  });
  return (
    <div className="max-w-2xl space-y-4">
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/webhooks/$name/events" params={{ name }}>
          ← Events of {name}
        </Link>
      </nav>
      <h1 className="text-2xl font-semibold">Replay failed events of {name}</h1>
      {job ? (
        <Progress name={name} jobId={job} />
      ) : preview.isPending ? (
        <Loading what="the count" />
      ) : preview.error ? (
        <ErrorText error={preview.error} />
      ) : (
        <div className="space-y-3 rounded-lg border border-line bg-panel p-4">
          <p>
            <strong>{preview.data.count}</strong> failed{" "}
            {preview.data.count === 1 ? "event" : "events"} will be delivered again to{" "}
            {preview.data.url && <code className="font-mono">{preview.data.url}</code>}
            {preview.data.url && preview.data.routes.length > 0 && " and "}
            {preview.data.routes.length > 0 &&
              `routes ${preview.data.routes.join(", ")} (filters evaluated again)`}
            , oldest first.
          </p>
          {preview.data.running_job_id ? (
            <p>
              A replay of this webhook is running:{" "}
              <Link from="/webhooks/$name/replay" search={{ job: preview.data.running_job_id }}>
                follow it
              </Link>
              .
            </p>
          ) : (
            <Button
              variant="primary"
              disabled={start.isPending || preview.data.count === 0}
              onClick={() => start.mutate()}
            >
              Replay {preview.data.count} failed {preview.data.count === 1 ? "event" : "events"}
            </Button>
          )}
          <ErrorText error={start.error} />
        </div>
      )}
    </div>
  );
}
