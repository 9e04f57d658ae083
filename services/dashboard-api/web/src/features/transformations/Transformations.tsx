import { useQuery } from "@tanstack/react-query";
import { Link, useNavigate } from "@tanstack/react-router";
import { useState } from "react";
import type { Transformation } from "../../api/types";
import { type Column, DataTable } from "../../components/DataTable";
import { Button, ErrorText, Loading, Time } from "../../components/ui";
import { DeleteTransformation } from "./actions";
import { transformationsQuery } from "./api";
import { TransformationEditor } from "./TransformationEditor";

const COLUMNS: Column<Transformation>[] = [
  {
    header: "Name",
    className: "font-medium",
    cell: (t) => (
      <Link to="/transformations/$trf" params={{ trf: t.name }}>
        {t.name}
      </Link>
    ),
  },
  { header: "Version", cell: (t) => `v${t.version}` },
  { header: "Updated", cell: (t) => <Time iso={t.updated_at} /> },
  {
    header: "Actions",
    srOnly: true,
    className: "text-right",
    cell: (t) => <DeleteTransformation name={t.name} />,
  },
];

/** The owner's transformations: name, version, last change; a new one in the editor. */
export function Transformations() {
  const { data, error, isPending } = useQuery(transformationsQuery);
  const [creating, setCreating] = useState(false);
  const navigate = useNavigate();
  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-center gap-3">
        <h1 className="text-2xl font-semibold">Transformations</h1>
        {!creating && (
          <Button variant="primary" className="ml-auto" onClick={() => setCreating(true)}>
            New transformation
          </Button>
        )}
      </div>
      <p className="text-sm text-muted">
        JavaScript that reshapes a request before a route delivers it. Name one in a route's
        transformation; test it here on your events or on a request.
      </p>
      {creating && (
        <TransformationEditor
          transformation={null}
          onCancel={() => setCreating(false)}
          onSaved={(saved) =>
            navigate({ to: "/transformations/$trf", params: { trf: saved.name } })
          }
        />
      )}
      {isPending ? (
        <Loading what="transformations" />
      ) : error ? (
        <ErrorText error={error} />
      ) : (
        <DataTable
          caption="Your transformations"
          columns={COLUMNS}
          rows={data}
          rowKey={(t) => t.id}
          empty="No transformations yet. Create one, then choose it in a route."
        />
      )}
    </div>
  );
}
