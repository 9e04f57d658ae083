import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useState } from "react";
import { api, call } from "../api/client";
import { webhooksQuery } from "../api/queries";
import type { Webhook } from "../api/types";
import {
  Button,
  Confirm,
  CopyButton,
  Empty,
  ErrorText,
  Field,
  inputClass,
  Loading,
  ShownOnce,
} from "../components/ui";
import { announce } from "../lib/announce";
import { sampleCurl } from "../lib/format";
import { VerificationSettings, verificationSummary } from "./WebhookVerification";

const NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Why a webhook name is refused, before it is sent (the webhook-name grammar of docs/owners/receiving.md, "Names"). */
export function nameProblem(name: string): string | null {
  if (!name) return "Give the webhook a name.";
  if (name.length > 64) return "At most 64 characters.";
  if (!NAME.test(name))
    return "Lower-case letters, digits and single hyphens between them (e.g. orders-eu).";
  return null;
}

function SecretShown({ secret, onClose }: { secret: string | null; onClose: () => void }) {
  return (
    <ShownOnce
      value={secret}
      title="Signing secret"
      what="secret"
      note="Store it now: hookbay keeps it encrypted and never shows it again."
      onClose={onClose}
    />
  );
}

function CreateWebhook({ onSecret }: { onSecret: (secret: string) => void }) {
  const client = useQueryClient();
  const [name, setName] = useState("");
  const [forwardUrl, setForwardUrl] = useState("");
  const [generate, setGenerate] = useState(true);
  const [touched, setTouched] = useState(false);
  const problem = nameProblem(name);
  const create = useMutation({
    mutationFn: () =>
      call(() =>
        api.POST("/api/v1/webhooks", {
          body: { name, forward_url: forwardUrl || null, generate_secret: generate },
        }),
      ),
    onSuccess: (hook) => {
      client.invalidateQueries({ queryKey: ["webhooks"] });
      announce(`Webhook ${hook.name} created`);
      setName("");
      setForwardUrl("");
      setTouched(false);
      if (hook.generated_secret) onSecret(hook.generated_secret);
    },
  });
  return (
    <form
      className="flex flex-wrap items-end gap-3 rounded-lg border border-line bg-panel p-4"
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!problem) create.mutate();
      }}
      aria-labelledby="create-title"
      noValidate
    >
      <h2 id="create-title" className="w-full font-semibold">
        New webhook
      </h2>
      <Field
        label="Name"
        hint={
          touched && problem ? (
            <span id="name-problem" className="text-bad">
              {problem}
            </span>
          ) : null
        }
      >
        <input
          className={inputClass}
          value={name}
          onChange={(e) => setName(e.target.value)}
          onBlur={() => setTouched(true)}
          aria-invalid={touched && problem !== null}
          aria-describedby={touched && problem ? "name-problem" : undefined}
        />
      </Field>
      <Field label="Forward URL (optional)">
        <input
          className={`${inputClass} w-80`}
          type="url"
          placeholder="https://example.com/hooks"
          value={forwardUrl}
          onChange={(e) => setForwardUrl(e.target.value)}
        />
      </Field>
      <label className="flex items-center gap-2 text-sm">
        <input type="checkbox" checked={generate} onChange={(e) => setGenerate(e.target.checked)} />
        Generate a signing secret
      </label>
      <Button type="submit" variant="primary" disabled={create.isPending}>
        Create webhook
      </Button>
      <div className="w-full">
        <ErrorText error={create.error} />
      </div>
    </form>
  );
}

type Pending = "rotate" | "remove" | "delete" | null;

function WebhookRow({ hook, onSecret }: { hook: Webhook; onSecret: (secret: string) => void }) {
  const client = useQueryClient();
  const [confirm, setConfirm] = useState<Pending>(null);
  const [typed, setTyped] = useState("");
  const [editing, setEditing] = useState(false);
  const [verifying, setVerifying] = useState(false);
  const [forwardUrl, setForwardUrl] = useState(hook.forward_url ?? "");
  const path = { params: { path: { name: hook.name } } };
  const done = (message: string) => {
    client.invalidateQueries({ queryKey: ["webhooks"] });
    client.invalidateQueries({ queryKey: ["overview"] });
    announce(message);
    setConfirm(null);
  };
  const action = useMutation({
    mutationFn: async (
      kind: "rotate" | "remove" | "delete" | "activate" | "deactivate" | "forward",
    ) => {
      if (kind === "rotate") {
        const hookNow = await call(() =>
          api.PATCH("/api/v1/webhooks/{name}", { ...path, body: { generate_secret: true } }),
        );
        if (hookNow.generated_secret) onSecret(hookNow.generated_secret);
        return "Secret rotated";
      }
      if (kind === "remove") {
        await call(() => api.PATCH("/api/v1/webhooks/{name}", { ...path, body: { secret: null } }));
        return "Secret removed";
      }
      if (kind === "delete") {
        await call(() => api.DELETE("/api/v1/webhooks/{name}", path));
        return `Webhook ${hook.name} deleted`;
      }
      if (kind === "forward") {
        await call(() =>
          api.PATCH("/api/v1/webhooks/{name}", {
            ...path,
            body: { forward_url: forwardUrl || null },
          }),
        );
        setEditing(false);
        return "Forward URL saved";
      }
      if (kind === "activate") await call(() => api.POST("/api/v1/webhooks/{name}/activate", path));
      else await call(() => api.POST("/api/v1/webhooks/{name}/deactivate", path));
      return kind === "activate" ? "Activated" : "Deactivated";
    },
    onSuccess: done,
  });
  return (
    <li className="space-y-2 rounded-lg border border-line bg-panel p-4">
      <div className="flex flex-wrap items-center gap-3">
        <h3 className="text-lg font-semibold">
          <Link to="/webhooks/$name/events" params={{ name: hook.name }}>
            {hook.name}
          </Link>
        </h3>
        <span className="rounded border border-line px-1.5 text-xs">
          {hook.active ? "● Active" : "○ Inactive"}
        </span>
        <span className="text-sm text-muted">{verificationSummary(hook)}</span>
      </div>
      <div className="flex flex-wrap items-center gap-2 text-sm">
        <code className="break-all font-mono">{hook.url}</code>
        <CopyButton text={hook.url} what="URL" />
        <CopyButton
          text={
            (hook.secret ? "# set HOOKBAY_SECRET to the webhook's secret first\n" : "") +
            sampleCurl(hook.url, !!hook.secret)
          }
          what="sample curl"
          label={hook.secret ? "Copy signed sample curl" : "Copy sample curl"}
        />
      </div>
      <div className="text-sm">
        {editing ? (
          <form
            className="flex flex-wrap items-end gap-2"
            onSubmit={(e) => {
              e.preventDefault();
              action.mutate("forward");
            }}
          >
            <Field label="Forward URL (empty: do not forward)">
              <input
                className={`${inputClass} w-96`}
                value={forwardUrl}
                onChange={(e) => setForwardUrl(e.target.value)}
              />
            </Field>
            <Button type="submit" variant="primary">
              Save
            </Button>
            <Button onClick={() => setEditing(false)}>Cancel</Button>
          </form>
        ) : (
          <span>
            Forwards to:{" "}
            {hook.forward_url ? (
              <code className="font-mono">{hook.forward_url}</code>
            ) : (
              "nowhere (events are only recorded)"
            )}{" "}
            <Button onClick={() => setEditing(true)}>Edit forward URL</Button>
          </span>
        )}
      </div>
      <div className="flex flex-wrap gap-2">
        <Button onClick={() => action.mutate(hook.active ? "deactivate" : "activate")}>
          {hook.active ? "Deactivate" : "Activate"}
        </Button>
        <Link
          to="/webhooks/$name/routes"
          params={{ name: hook.name }}
          className="rounded border border-line bg-panel px-3 py-1.5 text-sm text-fg no-underline hover:bg-hover"
        >
          Routes
        </Link>
        <Button onClick={() => setVerifying(!verifying)} aria-expanded={verifying}>
          Verification
        </Button>
        {!hook.verification && (
          <Button onClick={() => setConfirm("rotate")}>
            {hook.secret ? "Rotate secret" : "Add secret"}
          </Button>
        )}
        {hook.secret && <Button onClick={() => setConfirm("remove")}>Remove secret</Button>}
        <Button variant="danger" onClick={() => setConfirm("delete")}>
          Delete
        </Button>
      </div>
      {verifying && <VerificationSettings hook={hook} onDone={() => setVerifying(false)} />}
      <ErrorText error={action.error} />
      <Confirm
        open={confirm === "rotate" || confirm === "remove"}
        title={
          confirm === "remove"
            ? `Remove the secret of ${hook.name}?`
            : `New secret for ${hook.name}?`
        }
        confirmLabel={confirm === "remove" ? "Remove secret" : "Generate secret"}
        danger={confirm === "remove"}
        busy={action.isPending}
        onConfirm={() => action.mutate(confirm === "remove" ? "remove" : "rotate")}
        onClose={() => setConfirm(null)}
      >
        <p>
          {confirm === "remove"
            ? "Requests are no longer verified: anyone who knows the URL can send events."
            : "Senders signing with the old secret are refused (401) from within 2 s."}
        </p>
      </Confirm>
      <Confirm
        open={confirm === "delete"}
        title={`Delete ${hook.name}?`}
        confirmLabel="Delete webhook"
        danger
        busy={action.isPending}
        disabled={typed !== hook.name}
        onConfirm={() => action.mutate("delete")}
        onClose={() => {
          setConfirm(null);
          setTyped("");
        }}
      >
        <p>Senders get 404 from then on. Type the webhook's name to confirm.</p>
        <Field label={`Type ${hook.name}`}>
          <input className={inputClass} value={typed} onChange={(e) => setTyped(e.target.value)} />
        </Field>
      </Confirm>
    </li>
  );
}

export function Webhooks() {
  const { data, error, isPending } = useQuery(webhooksQuery);
  const [secret, setSecret] = useState<string | null>(null);
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">Webhooks</h1>
      <CreateWebhook onSecret={setSecret} />
      {isPending ? (
        <Loading what="webhooks" />
      ) : error ? (
        <ErrorText error={error} />
      ) : data.length === 0 ? (
        <Empty>No webhooks yet.</Empty>
      ) : (
        <ul className="space-y-3">
          {data.map((hook) => (
            <WebhookRow key={hook.id} hook={hook} onSecret={setSecret} />
          ))}
        </ul>
      )}
      <SecretShown secret={secret} onClose={() => setSecret(null)} />
    </div>
  );
}
