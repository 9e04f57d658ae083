import { useQuery } from "@tanstack/react-query";
import { getRouteApi, Link, useNavigate } from "@tanstack/react-router";
import { ApiError } from "../../api/client";
import { ErrorText, Loading, Time } from "../../components/ui";
import { NotFound } from "../../pages/Errors";
import { DeleteTransformation } from "./actions";
import { transformationQuery } from "./api";
import { TestPanel } from "./TestPanel";
import { TransformationEditor } from "./TransformationEditor";

const route = getRouteApi("/_app/transformations/$trf");

/** One transformation: its code and env to edit, a test panel, delete. */
export function TransformationDetail() {
  const { trf } = route.useParams();
  const navigate = useNavigate();
  const { data, error, isPending } = useQuery(transformationQuery(trf));
  if (error instanceof ApiError && error.status === 404) return <NotFound />;
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/transformations">← Transformations</Link>
      </nav>
      {isPending ? (
        <Loading what="the transformation" />
      ) : error ? (
        <ErrorText error={error} />
      ) : (
        <>
          <div className="flex flex-wrap items-center gap-3">
            <h1 className="text-2xl font-semibold">
              Transformation <span className="font-mono">{data.name}</span>
            </h1>
            <span className="text-sm text-muted" data-testid="transformation-version">
              version {data.version}, changed <Time iso={data.updated_at} />
            </span>
            <div className="ml-auto">
              <DeleteTransformation
                name={data.name}
                onDeleted={() => navigate({ to: "/transformations" })}
              />
            </div>
          </div>
          <TransformationEditor key={data.id} transformation={data} />
          <TestPanel transformation={data} />
        </>
      )}
    </div>
  );
}
