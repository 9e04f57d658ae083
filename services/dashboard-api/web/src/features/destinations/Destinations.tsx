import { useQuery } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import type { Destination } from "../../api/types";
import { type Column, DataTable } from "../../components/DataTable";
import { ErrorText, Loading } from "../../components/ui";
import { DestinationActions } from "./actions";
import { destinationsQuery } from "./api";
import { DestinationForm } from "./DestinationForm";
import { rateText, StateBadge } from "./StateBadge";

const COLUMNS: Column<Destination>[] = [
  {
    header: "Name",
    className: "font-medium",
    cell: (d) => (
      <Link to="/destinations/$dest" params={{ dest: d.name }}>
        {d.name}
      </Link>
    ),
  },
  { header: "URL", className: "max-w-md break-all font-mono", cell: (d) => d.url },
  { header: "State", cell: (d) => <StateBadge destination={d} /> },
  { header: "Rate limit", cell: (d) => rateText(d) },
  {
    header: "Concurrency",
    cell: (d) => (d.max_concurrency === 1 ? "1 (in order)" : d.max_concurrency),
  },
  { header: "Actions", srOnly: true, cell: (d) => <DestinationActions destination={d} /> },
];

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
      ) : (
        <DataTable
          caption="Your destinations"
          columns={COLUMNS}
          rows={data}
          rowKey={(d) => d.id}
          empty="No destinations yet. Create one below, then point a webhook's routes at it."
        />
      )}
      <DestinationForm destination={null} />
    </div>
  );
}
