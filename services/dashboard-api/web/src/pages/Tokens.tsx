import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, call } from "../api/client";
import type { Token } from "../api/types";
import {
  Button,
  Confirm,
  Empty,
  ErrorText,
  Field,
  inputClass,
  Loading,
  ShownOnce,
  Time,
} from "../components/ui";
import { announce } from "../lib/announce";

export function Tokens() {
  const client = useQueryClient();
  const tokens = useQuery({
    queryKey: ["tokens"],
    queryFn: () => call(() => api.GET("/api/v1/tokens")),
  });
  const [name, setName] = useState("");
  const [issued, setIssued] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<Token | null>(null);
  const create = useMutation({
    mutationFn: () => call(() => api.POST("/api/v1/tokens", { body: { name: name || "api" } })),
    onSuccess: (token) => {
      setIssued(token.token);
      setName("");
      client.invalidateQueries({ queryKey: ["tokens"] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) =>
      call(() => api.DELETE("/api/v1/tokens/{token_id}", { params: { path: { token_id: id } } })),
    onSuccess: () => {
      announce("Token revoked");
      setRevoking(null);
      client.invalidateQueries({ queryKey: ["tokens"] });
    },
  });
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">API tokens</h1>
      <p className="text-sm text-muted">
        For scripts and the CLI: send as <code>Authorization: Bearer …</code>.
      </p>
      <form
        className="flex items-end gap-2"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Field label="Token name">
          <input
            className={inputClass}
            value={name}
            maxLength={64}
            onChange={(e) => setName(e.target.value)}
            placeholder="ci-deploy"
          />
        </Field>
        <Button type="submit" variant="primary" disabled={create.isPending}>
          Create token
        </Button>
      </form>
      <ErrorText error={create.error} />
      {tokens.isPending ? (
        <Loading what="tokens" />
      ) : tokens.error ? (
        <ErrorText error={tokens.error} />
      ) : tokens.data.length === 0 ? (
        <Empty>No tokens.</Empty>
      ) : (
        <table className="w-full rounded-lg border border-line bg-panel text-sm">
          <thead>
            <tr className="text-left">
              <th className="p-2">Name</th>
              <th className="p-2">Created</th>
              <th className="p-2">Last used</th>
              <th className="p-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.data.map((t) => (
              <tr key={t.id} className="border-t border-line">
                <td className="p-2">{t.name}</td>
                <td className="p-2">
                  <Time iso={t.created_at} />
                </td>
                <td className="p-2">{t.last_used_at ? <Time iso={t.last_used_at} /> : "never"}</td>
                <td className="p-2 text-right">
                  <Button
                    variant="danger"
                    onClick={() => setRevoking(t)}
                    aria-label={`Revoke ${t.name}`}
                  >
                    Revoke
                  </Button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ShownOnce
        value={issued}
        title="New API token"
        what="token"
        note="hookbay stores only its hash: copy it now."
        onClose={() => setIssued(null)}
      />
      <Confirm
        open={revoking !== null}
        title={`Revoke ${revoking?.name}?`}
        confirmLabel="Revoke token"
        danger
        busy={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking.id)}
        onClose={() => setRevoking(null)}
      >
        <p>Scripts using it get 401 at once.</p>
        <ErrorText error={revoke.error} />
      </Confirm>
    </div>
  );
}
