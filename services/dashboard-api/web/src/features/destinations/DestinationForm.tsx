import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type ReactNode, useId, useState } from "react";
import { ApiError, api, call, fieldProblem, fieldProblems } from "../../api/client";
import type { Destination } from "../../api/types";
import { Button, ErrorText, inputClass } from "../../components/ui";
import { announce } from "../../lib/announce";
import { nameProblem } from "../../pages/Webhooks";
import { forwardWebhook, MASK } from "./api";

type Period = "second" | "minute" | "hour";
type HeaderRow = { key: number; name: string; value: string };

/** What the form holds, as typed. A stored header's value starts as the mask (write-only):
 * sent back unchanged it keeps the stored value. */
type Draft = {
  name: string;
  url: string;
  timeout: string;
  concurrency: string;
  headers: HeaderRow[];
  schedule: string;
  rateCount: string;
  ratePeriod: Period;
};

let rowKey = 0;
const row = (name = "", value = ""): HeaderRow => ({ key: ++rowKey, name, value });

function draftOf(d: Destination | null): Draft {
  return {
    name: d?.name ?? "",
    url: d?.url ?? "",
    timeout: String(d?.timeout_s ?? 10),
    concurrency: String(d?.max_concurrency ?? 20),
    headers: d ? Object.keys(d.headers).map((name) => row(name, MASK)) : [],
    schedule: d?.retry_schedule?.join(", ") ?? "",
    rateCount: d?.rate_limit ? String(d.rate_limit.count) : "",
    ratePeriod: d?.rate_limit?.period ?? "second",
  };
}

/** A number as typed: sent as is when it is one (the server judges the range), else NaN,
 * which the server refuses naming the field. */
const num = (text: string) => (text.trim() === "" ? Number.NaN : Number(text));

function bodyOf(d: Draft) {
  const schedule = d.schedule
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    url: d.url.trim(),
    timeout_s: num(d.timeout),
    max_concurrency: num(d.concurrency),
    headers: Object.fromEntries(
      d.headers.filter((h) => h.name.trim() || h.value).map((h) => [h.name.trim(), h.value]),
    ),
    retry_schedule: schedule.length ? schedule : null,
    rate_limit: d.rateCount.trim() ? { count: num(d.rateCount), period: d.ratePeriod } : null,
  };
}

/** A labelled control with its problem (from the server, or the name grammar) next to it. */
function Labelled({
  label,
  problem,
  hint,
  children,
}: {
  label: string;
  problem: string | null;
  hint?: string;
  children: (props: {
    id: string;
    "aria-invalid": boolean;
    "aria-describedby"?: string;
  }) => ReactNode;
}) {
  const id = useId();
  const described = [problem ? `${id}-problem` : "", hint ? `${id}-hint` : ""]
    .filter(Boolean)
    .join(" ");
  return (
    <div className="flex flex-col gap-1 text-sm">
      <label htmlFor={id} className="font-medium">
        {label}
      </label>
      {children({
        id,
        "aria-invalid": problem !== null,
        "aria-describedby": described || undefined,
      })}
      {hint && (
        <span id={`${id}-hint`} className="text-xs text-muted">
          {hint}
        </span>
      )}
      {problem && (
        <span id={`${id}-problem`} className="text-bad">
          {problem}
        </span>
      )}
    </div>
  );
}

/** Create (no `destination`) or edit a destination. Refused fields are shown next to their
 * control, from the 422's `loc`. */
export function DestinationForm({
  destination,
  onDone,
}: {
  destination: Destination | null;
  onDone?: (saved: Destination) => void;
}) {
  const client = useQueryClient();
  const [d, setD] = useState<Draft>(() => draftOf(destination));
  const [touched, setTouched] = useState(false);
  const set =
    <K extends keyof Draft>(key: K) =>
    (value: Draft[K]) =>
      setD((old) => ({ ...old, [key]: value }));
  const creating = destination === null;
  const managed = destination !== null && forwardWebhook(destination.name) !== null;
  const localName = creating && touched ? nameProblem(d.name) : null;
  const save = useMutation({
    mutationFn: (): Promise<Destination> =>
      creating
        ? call(() => api.POST("/api/v1/destinations", { body: { name: d.name, ...bodyOf(d) } }))
        : call(() =>
            api.PATCH("/api/v1/destinations/{dest}", {
              params: { path: { dest: destination.name } },
              body: bodyOf(d),
            }),
          ),
    onSuccess: (saved) => {
      client.invalidateQueries({ queryKey: ["destinations"] });
      announce(creating ? `Destination ${saved.name} created` : `Destination ${saved.name} saved`);
      if (creating) {
        setD(draftOf(null));
        setTouched(false);
      } else {
        setD(draftOf(saved));
      }
      onDone?.(saved);
    },
  });
  const problem = (...path: string[]) => fieldProblem(save.error, ...path);
  const shown = [
    "name",
    "url",
    "timeout_s",
    "max_concurrency",
    "headers",
    "retry_schedule",
    "rate_limit",
  ];
  const unplaced = fieldProblems(save.error).filter((p) => !shown.includes(String(p.loc[0])));
  const title = creating ? "New destination" : `Settings of ${destination.name}`;
  const titleId = useId();
  return (
    <form
      className="space-y-3 rounded-lg border border-line bg-panel p-4"
      aria-labelledby={titleId}
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!creating || !nameProblem(d.name)) save.mutate();
      }}
    >
      <h2 id={titleId} className="font-semibold">
        {title}
      </h2>
      <div className="flex flex-wrap items-start gap-3">
        {creating && (
          <Labelled label="Name" problem={localName ?? problem("name")}>
            {(props) => (
              <input
                {...props}
                className={inputClass}
                value={d.name}
                onChange={(e) => set("name")(e.target.value)}
                onBlur={() => setTouched(true)}
              />
            )}
          </Labelled>
        )}
        <Labelled label="URL" problem={problem("url")}>
          {(props) => (
            <input
              {...props}
              className={`${inputClass} w-96`}
              type="url"
              placeholder="https://example.com/hooks"
              value={d.url}
              readOnly={managed}
              title={managed ? "Set on the webhook (its forward URL)" : undefined}
              onChange={(e) => set("url")(e.target.value)}
            />
          )}
        </Labelled>
        <Labelled label="Timeout (seconds)" problem={problem("timeout_s")} hint="1 to 60">
          {(props) => (
            <input
              {...props}
              className={`${inputClass} w-28`}
              type="number"
              min={1}
              max={60}
              value={d.timeout}
              onChange={(e) => set("timeout")(e.target.value)}
            />
          )}
        </Labelled>
        <Labelled
          label="Max concurrency"
          problem={problem("max_concurrency")}
          hint="1 to 64; 1: one at a time, in order"
        >
          {(props) => (
            <input
              {...props}
              className={`${inputClass} w-28`}
              type="number"
              min={1}
              max={64}
              value={d.concurrency}
              onChange={(e) => set("concurrency")(e.target.value)}
            />
          )}
        </Labelled>
      </div>
      <div className="flex flex-wrap items-start gap-3">
        <Labelled label="Rate limit (requests; empty: no limit)" problem={problem("rate_limit")}>
          {(props) => (
            <input
              {...props}
              className={`${inputClass} w-40`}
              type="number"
              min={1}
              value={d.rateCount}
              onChange={(e) => set("rateCount")(e.target.value)}
            />
          )}
        </Labelled>
        <Labelled label="Per" problem={null}>
          {(props) => (
            <select
              {...props}
              className={inputClass}
              value={d.ratePeriod}
              onChange={(e) => set("ratePeriod")(e.target.value as Period)}
            >
              <option value="second">second</option>
              <option value="minute">minute</option>
              <option value="hour">hour</option>
            </select>
          )}
        </Labelled>
        <Labelled
          label="Retry schedule"
          problem={problem("retry_schedule")}
          hint="Delays of the first attempt and each retry, e.g. 0, 10s, 1m, 1h; empty: the installation's"
        >
          {(props) => (
            <input
              {...props}
              className={`${inputClass} w-96 font-mono`}
              placeholder="0, 10s, 1m, 10m, 1h, 6h"
              value={d.schedule}
              onChange={(e) => set("schedule")(e.target.value)}
            />
          )}
        </Labelled>
      </div>
      <fieldset className="space-y-2">
        <legend className="text-sm font-medium">Headers</legend>
        <p className="text-xs text-muted">
          Sent with every delivery. Values are write-only: a stored one shows as {MASK} and is kept
          unless you change it.
        </p>
        {d.headers.map((h, i) => (
          <div key={h.key} className="flex flex-wrap items-center gap-2">
            <input
              aria-label={`Header ${i + 1} name`}
              className={`${inputClass} w-56 font-mono`}
              placeholder="authorization"
              value={h.name}
              onChange={(e) =>
                set("headers")(
                  d.headers.map((o) => (o.key === h.key ? { ...o, name: e.target.value } : o)),
                )
              }
            />
            <input
              aria-label={`Header ${i + 1} value`}
              className={`${inputClass} w-80 font-mono`}
              autoComplete="off"
              value={h.value}
              onFocus={(e) => e.target.value === MASK && e.target.select()}
              onChange={(e) =>
                set("headers")(
                  d.headers.map((o) => (o.key === h.key ? { ...o, value: e.target.value } : o)),
                )
              }
            />
            <Button
              aria-label={`Remove header ${h.name || i + 1}`}
              onClick={() => set("headers")(d.headers.filter((o) => o.key !== h.key))}
            >
              Remove
            </Button>
          </div>
        ))}
        <Button onClick={() => set("headers")([...d.headers, row()])}>Add header</Button>
        {problem("headers") && (
          <p className="text-sm text-bad" role="alert">
            {problem("headers")}
          </p>
        )}
      </fieldset>
      <div className="flex flex-wrap items-center gap-2">
        <Button type="submit" variant="primary" disabled={save.isPending}>
          {creating ? "Create destination" : "Save destination"}
        </Button>
        {fieldProblems(save.error).length > 0 && (
          <p role="alert" className="text-sm text-bad">
            Not saved: see the fields marked.
          </p>
        )}
      </div>
      {unplaced.map((p) => (
        <p key={p.loc.join(".")} className="text-sm text-bad">
          {p.loc.join(".")}: {p.msg}
        </p>
      ))}
      {save.error instanceof ApiError && save.error.status !== 422 && (
        <ErrorText error={save.error} />
      )}
    </form>
  );
}
