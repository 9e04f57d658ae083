import { useQuery } from "@tanstack/react-query";
import { getRouteApi, Link, useNavigate } from "@tanstack/react-router";
import { ApiError } from "../../api/client";
import { ErrorText, Loading, Time } from "../../components/ui";
import { NotFound } from "../../pages/Errors";
import { DestinationActions } from "./actions";
import { destinationQuery, forwardWebhook } from "./api";
import { DestinationForm } from "./DestinationForm";
import { Health } from "./Health";
import { rateText, StateBadge } from "./StateBadge";

const route = getRouteApi("/_app/destinations/$dest");

/** One destination: its state with pause / resume and delete, and its settings to edit. */
export function DestinationDetail() {
  const { dest } = route.useParams();
  const navigate = useNavigate();
  const { data, error, isPending } = useQuery(destinationQuery(dest));
  if (error instanceof ApiError && error.status === 404) return <NotFound />;
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/destinations">← Destinations</Link>
      </nav>
      {isPending ? (
        <Loading what="the destination" />
      ) : error ? (
        <ErrorText error={error} />
      ) : (
        <>
          <div className="flex flex-wrap items-center gap-3">
            <h1 className="text-2xl font-semibold">
              Destination <span className="font-mono">{data.name}</span>
            </h1>
            <StateBadge destination={data} />
            <div className="ml-auto">
              <DestinationActions
                destination={data}
                onDeleted={() => navigate({ to: "/destinations" })}
              />
            </div>
          </div>
          {forwardWebhook(data.name) !== null && (
            <p className="text-sm text-muted">
              The forward URL of webhook{" "}
              <Link to="/webhooks/$name/routes" params={{ name: forwardWebhook(data.name) ?? "" }}>
                {forwardWebhook(data.name)}
              </Link>
              : its URL is set on the webhook, and it goes when the forward URL is removed. Its
              other settings, pause and resume are yours.
            </p>
          )}
          <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 rounded-lg border border-line bg-panel p-4 text-sm">
            <dt className="font-medium">URL</dt>
            <dd className="break-all font-mono">{data.url}</dd>
            <dt className="font-medium">Timeout</dt>
            <dd>{data.timeout_s} s</dd>
            <dt className="font-medium">Rate limit</dt>
            <dd>{rateText(data)}</dd>
            <dt className="font-medium">Max concurrency</dt>
            <dd>{data.max_concurrency}</dd>
            <dt className="font-medium">Retry schedule</dt>
            <dd className="font-mono">
              {data.retry_schedule ? data.retry_schedule.join(", ") : "the installation's"}
            </dd>
            <dt className="font-medium">Updated</dt>
            <dd>
              <Time iso={data.updated_at} />
            </dd>
          </dl>
          <Health dest={data.name} breaker={data.breaker} />
          <DestinationForm destination={data} />
        </>
      )}
    </div>
  );
}
