import { useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { Empty, ErrorText, Loading } from "../../components/ui";
import { DestinationActions } from "./actions";
import { destinationsQuery } from "./api";
import { DestinationForm } from "./DestinationForm";
import { rateText, StateBadge } from "./StateBadge";

/** The owner's destinations: state, pace, pause / resume, delete; a form for a new one. */
export function Destinations() {
  const { data, error, isPending } = useQuery(destinationsQuery);
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">Destinations</h1>
      <p className="text-sm text-muted">
        Where routes deliver: a URL with its timeout, headers, retry schedule, rate limit and
        concurrency. A paused destination holds its deliveries.
      </p>
      {isPending ? (
        <Loading what="destinations" />
      ) : error ? (
        <ErrorText error={error} />
      ) : data.length === 0 ? (
        <Empty>No destinations yet. Create one below, then point a webhook's routes at it.</Empty>
      ) : (
        <table className="w-full rounded-lg border border-line bg-panel text-sm">
          <caption className="sr-only">Your destinations</caption>
          <thead>
            <tr className="text-left">
              <th className="p-2">Name</th>
              <th className="p-2">URL</th>
              <th className="p-2">State</th>
              <th className="p-2">Rate limit</th>
              <th className="p-2">Concurrency</th>
              <th className="p-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {data.map((d) => (
              <tr key={d.id} className="border-t border-line align-top">
                <td className="p-2 font-medium">
                  <Link to="/destinations/$dest" params={{ dest: d.name }}>
                    {d.name}
                  </Link>
                </td>
                <td className="max-w-md break-all p-2 font-mono">{d.url}</td>
                <td className="p-2">
                  <StateBadge destination={d} />
                </td>
                <td className="p-2">{rateText(d)}</td>
                <td className="p-2">
                  {d.max_concurrency === 1 ? "1 (in order)" : d.max_concurrency}
                </td>
                <td className="p-2">
                  <DestinationActions destination={d} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <DestinationForm destination={null} />
    </div>
  );
}
