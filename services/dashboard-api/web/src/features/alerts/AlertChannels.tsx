import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, call } from "../../api/client";
import type { AlertChannel, AlertChannelCreate, AlertChannelType } from "../../api/types";
import { type Column, DataTable } from "../../components/DataTable";
import { Button, Confirm, ErrorText, Field, inputClass, Loading, Time } from "../../components/ui";
import { announce } from "../../lib/announce";
import { channelsQuery, channelTarget } from "./api";

const TYPES: { type: AlertChannelType; label: string }[] = [
  { type: "webhook", label: "Signed webhook" },
  { type: "slack", label: "Slack" },
  { type: "pagerduty", label: "PagerDuty" },
  { type: "email", label: "Email" },
];
const LABEL = Object.fromEntries(TYPES.map((t) => [t.type, t.label])) as Record<
  AlertChannelType,
  string
>;

/** Where the owner is told about issues: one notification per issue opened, reopened or
 * resolved; each channel can be sent a test. */
export function AlertChannels() {
  const { data, error, isPending } = useQuery(channelsQuery);
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">Alert channels</h1>
      <p className="text-sm text-muted">
        Every channel hears of every issue opened, reopened or resolved: a signed webhook (Standard
        Webhooks signature), a Slack incoming webhook, PagerDuty (Events API v2) or email.
      </p>
      {isPending ? (
        <Loading what="alert channels" />
      ) : error ? (
        <ErrorText error={error} />
      ) : (
        <DataTable
          caption="Your alert channels"
          columns={COLUMNS}
          rows={data}
          rowKey={(channel) => channel.id}
          empty="No alert channels yet: issues are only on the Issues page."
          rowTestId="alert-channel"
        />
      )}
      <ChannelForm />
    </div>
  );
}

const COLUMNS: Column<AlertChannel>[] = [
  { header: "Type", className: "font-medium", cell: (channel) => LABEL[channel.type] },
  {
    header: "To",
    className: "max-w-md break-all font-mono",
    cell: (channel) => channelTarget(channel),
  },
  {
    header: "Last sent",
    cell: (channel) => (channel.last_sent_at ? <Time iso={channel.last_sent_at} /> : "—"),
  },
  {
    header: "Failing",
    cell: (channel) =>
      channel.failing_since ? (
        <span className="text-bad">
          since <Time iso={channel.failing_since} />: {channel.last_error}
        </span>
      ) : (
        "no"
      ),
  },
  { header: "Actions", srOnly: true, cell: (channel) => <ChannelActions channel={channel} /> },
];

function ChannelActions({ channel }: { channel: AlertChannel }) {
  const client = useQueryClient();
  const [asking, setAsking] = useState(false);
  const [tested, setTested] = useState<string | null>(null);
  const path = { params: { path: { channel_id: channel.id } } };
  const target = channelTarget(channel);
  const test = useMutation({
    mutationFn: () => call(() => api.POST("/api/v1/alert-channels/{channel_id}/test", path)),
    onSuccess: (result) => {
      const said = result.sent ? "Test notification sent" : `Not sent: ${result.error}`;
      setTested(said);
      announce(said);
      return client.invalidateQueries({ queryKey: ["alert-channels"] });
    },
  });
  const remove = useMutation({
    mutationFn: () => call(() => api.DELETE("/api/v1/alert-channels/{channel_id}", path)),
    onSuccess: () => {
      setAsking(false);
      announce(`${LABEL[channel.type]} channel deleted`);
      return client.invalidateQueries({ queryKey: ["alert-channels"] });
    },
  });
  return (
    <>
      <div className="flex flex-wrap gap-1">
        <Button
          disabled={test.isPending}
          aria-label={`Send a test notification to ${target}`}
          onClick={() => test.mutate()}
        >
          {test.isPending ? "Sending…" : "Send test"}
        </Button>
        <Button
          variant="danger"
          aria-label={`Delete the channel to ${target}`}
          onClick={() => setAsking(true)}
        >
          Delete
        </Button>
      </div>
      {tested && <p className="text-muted">{tested}</p>}
      <ErrorText error={test.error} />
      <Confirm
        open={asking}
        title={`Delete the channel to ${target}?`}
        confirmLabel="Delete channel"
        danger
        busy={remove.isPending}
        onConfirm={() => remove.mutate()}
        onClose={() => setAsking(false)}
      >
        <p>Issues are no longer sent there.</p>
        <ErrorText error={remove.error} />
      </Confirm>
    </>
  );
}

type Draft = {
  type: AlertChannelType;
  url: string;
  secret: string;
  routing_key: string;
  events_url: string;
  to: string;
};
const EMPTY: Draft = {
  type: "webhook",
  url: "",
  secret: "",
  routing_key: "",
  events_url: "",
  to: "",
};

/** The fields of the draft's type, and only those (the API refuses the others). */
function body(d: Draft): AlertChannelCreate {
  if (d.type === "webhook") return { type: d.type, url: d.url, secret: d.secret };
  if (d.type === "slack") return { type: d.type, url: d.url };
  if (d.type === "pagerduty")
    return { type: d.type, routing_key: d.routing_key, events_url: d.events_url || null };
  return { type: d.type, to: d.to };
}

function ChannelForm() {
  const client = useQueryClient();
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const set = (field: keyof Draft) => (e: { target: { value: string } }) =>
    setDraft({ ...draft, [field]: e.target.value });
  const create = useMutation({
    mutationFn: () => call(() => api.POST("/api/v1/alert-channels", { body: body(draft) })),
    onSuccess: () => {
      announce(`${LABEL[draft.type]} channel added`);
      setDraft({ ...EMPTY, type: draft.type });
      return client.invalidateQueries({ queryKey: ["alert-channels"] });
    },
  });
  return (
    <form
      aria-label="New alert channel"
      className="space-y-3 rounded-lg border border-line bg-panel p-4"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <h2 className="text-lg font-semibold">New alert channel</h2>
      <Field label="Type">
        <select className={inputClass} value={draft.type} onChange={set("type")}>
          {TYPES.map((t) => (
            <option key={t.type} value={t.type}>
              {t.label}
            </option>
          ))}
        </select>
      </Field>
      {(draft.type === "webhook" || draft.type === "slack") && (
        <Field label={draft.type === "slack" ? "Slack incoming webhook URL" : "URL"}>
          <input className={inputClass} required value={draft.url} onChange={set("url")} />
        </Field>
      )}
      {draft.type === "webhook" && (
        <Field
          label="Signing secret"
          hint={
            <span className="text-muted">
              whsec_ and base64 (24 to 64 bytes); verify with any Standard Webhooks library
            </span>
          }
        >
          <input
            className={inputClass}
            required
            autoComplete="off"
            value={draft.secret}
            onChange={set("secret")}
          />
        </Field>
      )}
      {draft.type === "pagerduty" && (
        <>
          <Field label="Integration (routing) key">
            <input
              className={inputClass}
              required
              autoComplete="off"
              value={draft.routing_key}
              onChange={set("routing_key")}
            />
          </Field>
          <Field
            label="Events API URL"
            hint={<span className="text-muted">empty: PagerDuty's own</span>}
          >
            <input className={inputClass} value={draft.events_url} onChange={set("events_url")} />
          </Field>
        </>
      )}
      {draft.type === "email" && (
        <Field label="Email address">
          <input
            className={inputClass}
            type="email"
            required
            value={draft.to}
            onChange={set("to")}
          />
        </Field>
      )}
      <ErrorText error={create.error} />
      <Button type="submit" variant="primary" disabled={create.isPending}>
        Add channel
      </Button>
    </form>
  );
}
