import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useState } from "react";
import { api, call } from "../../api/client";
import { Button, Confirm, ErrorText } from "../../components/ui";
import { announce } from "../../lib/announce";
import { routesInUse } from "./api";

function InUse({ routes }: { routes: string[] }) {
  return (
    <div role="alert" className="space-y-1 text-sm text-bad">
      <p>In use by routes: set their transformation to none or another one first.</p>
      <ul className="list-inside list-disc">
        {routes.map((path) => {
          const [webhook, route] = path.split("/");
          return (
            <li key={path}>
              <Link to="/webhooks/$name/routes" params={{ name: webhook }}>
                {webhook} / {route}
              </Link>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

/** Delete, asking first; a 409 names the routes that run it (and the delete stays refused). */
export function DeleteTransformation({
  name,
  onDeleted,
}: {
  name: string;
  onDeleted?: () => void;
}) {
  const client = useQueryClient();
  const [open, setOpen] = useState(false);
  const remove = useMutation({
    mutationFn: () =>
      call(() => api.DELETE("/api/v1/transformations/{trf}", { params: { path: { trf: name } } })),
    onSuccess: () => {
      setOpen(false);
      announce(`Transformation ${name} deleted`);
      client.removeQueries({ queryKey: ["transformations", name] });
      client.invalidateQueries({ queryKey: ["transformations"] });
      onDeleted?.();
    },
  });
  const inUse = routesInUse(remove.error);
  return (
    <>
      <Button variant="danger" onClick={() => setOpen(true)} aria-label={`Delete ${name}`}>
        Delete
      </Button>
      <Confirm
        open={open}
        title={`Delete ${name}?`}
        confirmLabel="Delete transformation"
        danger
        busy={remove.isPending}
        disabled={inUse !== null}
        onConfirm={() => remove.mutate()}
        onClose={() => {
          setOpen(false);
          remove.reset();
        }}
      >
        <p>A transformation that routes run cannot be deleted.</p>
        {inUse ? <InUse routes={inUse} /> : <ErrorText error={remove.error} />}
      </Confirm>
    </>
  );
}
