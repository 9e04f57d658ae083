import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Link } from "@tanstack/react-router";
import { useEffect, useId, useState } from "react";
import { ApiError, api, call, fieldProblem, fieldProblems } from "../../api/client";
import type { Route } from "../../api/types";
import { Button, ErrorText, inputClass } from "../../components/ui";
import { announce } from "../../lib/announce";
import { nameProblem } from "../../pages/Webhooks";
import { destinationsQuery, forwardWebhook } from "../destinations/api";
import { dryRunQuery, transformationsQuery } from "./api";
import { DedupeFields, dedupeDraft, dedupeProblems, dedupeRule } from "./DedupeFields";
import { DryRunPanel } from "./DryRunPanel";
import { formatDelay, parseDelay } from "./delay";
import { parseFilter } from "./json";

const EXAMPLE = '{\n  "body": {"type": {"$startsWith": "invoice."}}\n}';

function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

/** The message of a filter refusal in a 422 (`loc` under `prefix`), with its JSON pointer. */
function filterRefusal(error: unknown, ...prefix: string[]): string | null {
  const found = fieldProblems(error).find((p) => prefix.every((part, i) => p.loc[i] === part));
  if (!found) return null;
  return found.pointer !== undefined
    ? `At ${found.pointer || "the whole filter"}: ${found.msg}`
    : found.msg;
}

/** Create (no `route`) or edit a route of `webhook`: destination, transformation, delay, enabled, the
 * filter as JSON (syntax checked here as you type, its meaning by the server through a debounced
 * dry run of the unsaved route) and the dry-run panel. */
export function RouteEditor({
  webhook,
  route,
  onClose,
}: {
  webhook: string;
  route: Route | null;
  onClose: () => void;
}) {
  const client = useQueryClient();
  const destinations = useQuery(destinationsQuery);
  const transformations = useQuery(transformationsQuery);
  const creating = route === null;
  const [name, setName] = useState(route?.name ?? "");
  const [destination, setDestination] = useState(route?.destination ?? "");
  const [enabled, setEnabled] = useState(route?.enabled ?? true);
  const [transform, setTransform] = useState(route?.transform ?? "");
  const [delay, setDelay] = useState(formatDelay(route?.delay_s));
  const [text, setText] = useState(route?.filter ? JSON.stringify(route.filter, null, 2) : "");
  const [dedupe, setDedupe] = useState(() => dedupeDraft(route?.dedupe));
  const rule = dedupeRule(dedupe);
  // debounced as text: a rule is a new object on every render
  const settledRuleText = useDebounced(JSON.stringify(rule), 300);
  const settledRule = JSON.parse(settledRuleText) as typeof rule;
  const [last, setLast] = useState(20);
  const [touched, setTouched] = useState(false);
  const ids = { title: useId(), name: useId(), filter: useId(), problem: useId(), help: useId() };

  const parsed = parseFilter(text);
  const parsedDelay = parseDelay(delay);
  const delaySeconds = parsedDelay.ok ? parsedDelay.seconds : null;
  const settled = useDebounced(text, 300);
  const settledParse = parseFilter(settled);
  const probeName = route?.name ?? (nameProblem(name) ? "new-route" : name);
  const probe = useQuery({
    ...dryRunQuery(
      webhook,
      probeName,
      settledParse.ok ? settledParse.filter : null,
      enabled,
      last,
      settledRule,
      transform || null,
    ),
    enabled: settledParse.ok,
  });

  const choices = (destinations.data ?? []).filter((d) => forwardWebhook(d.name) === null);
  const destinationChoice = destination || choices[0]?.name || "";
  const save = useMutation({
    mutationFn: (): Promise<Route> => {
      const filter = parsed.ok ? parsed.filter : null;
      return creating
        ? call(() =>
            api.POST("/api/v1/webhooks/{name}/routes", {
              params: { path: { name: webhook } },
              body: {
                name,
                destination: destinationChoice,
                enabled,
                filter,
                transform: transform || null,
                dedupe: rule,
                delay_s: delaySeconds,
              },
            }),
          )
        : call(() =>
            api.PATCH("/api/v1/webhooks/{name}/routes/{route}", {
              params: { path: { name: webhook, route: route.name } },
              body: {
                destination: destinationChoice,
                enabled,
                filter,
                transform: transform || null,
                dedupe: rule,
                delay_s: delaySeconds,
              },
            }),
          );
    },
    onSuccess: (saved) => {
      client.invalidateQueries({ queryKey: ["routes", webhook] });
      announce(creating ? `Route ${saved.name} created` : `Route ${saved.name} saved`);
      onClose();
    },
  });

  const localName = creating && touched ? nameProblem(name) : null;
  const nameRefusal = localName ?? fieldProblem(save.error, "name");
  const destinationRefusal = fieldProblem(save.error, "destination");
  const transformRefusal = fieldProblem(save.error, "transform");
  const delayRefusal = parsedDelay.ok ? fieldProblem(save.error, "delay_s") : parsedDelay.message;
  // the newest word on the filter: the syntax while it does not parse, else the server's
  // verdict on the text it last saw (the dry run), else the save's refusal
  const filterProblem = !parsed.ok
    ? `JSON syntax: ${parsed.message}${parsed.line ? ` (line ${parsed.line}, column ${parsed.column})` : ""}`
    : ((settled === text ? filterRefusal(probe.error, "route", "filter") : null) ??
      filterRefusal(save.error, "filter"));
  const checking = parsed.ok && (settled !== text || probe.isFetching);
  const others = fieldProblems(save.error).filter(
    (p) =>
      !["name", "destination", "filter", "transform", "dedupe", "delay_s"].includes(
        String(p.loc[0]),
      ),
  );
  const dedupeRefusals = save.error
    ? dedupeProblems(save.error)
    : settledRuleText === JSON.stringify(rule)
      ? dedupeProblems(probe.error, "route")
      : [];

  return (
    <form
      aria-labelledby={ids.title}
      className="space-y-3 rounded-lg border border-line bg-panel p-4"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (parsed.ok && parsedDelay.ok && !(creating && nameProblem(name))) save.mutate();
      }}
    >
      <h2 id={ids.title} className="font-semibold">
        {creating ? "New route" : `Edit route ${route.name}`}
      </h2>
      <div className="flex flex-wrap items-start gap-3">
        {creating && (
          <div className="flex flex-col gap-1 text-sm">
            <label htmlFor={ids.name} className="font-medium">
              Name
            </label>
            <input
              id={ids.name}
              className={inputClass}
              value={name}
              onChange={(e) => setName(e.target.value)}
              onBlur={() => setTouched(true)}
              aria-invalid={nameRefusal !== null}
              aria-describedby={nameRefusal ? `${ids.name}-problem` : undefined}
            />
            {nameRefusal && (
              <span id={`${ids.name}-problem`} className="text-bad">
                {nameRefusal}
              </span>
            )}
          </div>
        )}
        <div className="flex flex-col gap-1 text-sm">
          <label htmlFor={`${ids.name}-dest`} className="font-medium">
            Destination
          </label>
          <select
            id={`${ids.name}-dest`}
            className={inputClass}
            value={destinationChoice}
            onChange={(e) => setDestination(e.target.value)}
            aria-invalid={destinationRefusal !== null}
            aria-describedby={destinationRefusal ? `${ids.name}-dest-problem` : undefined}
          >
            {choices.map((d) => (
              <option key={d.id} value={d.name}>
                {d.name}
                {d.state === "active" ? "" : ` (${d.state})`}
              </option>
            ))}
          </select>
          {destinations.data !== undefined && choices.length === 0 && (
            <span className="text-muted">
              No destinations yet: <Link to="/destinations">create one</Link> first.
            </span>
          )}
          {destinationRefusal && (
            <span id={`${ids.name}-dest-problem`} className="text-bad">
              {destinationRefusal}
            </span>
          )}
        </div>
        <div className="flex flex-col gap-1 text-sm">
          <label htmlFor={`${ids.name}-transform`} className="font-medium">
            Transformation
          </label>
          <select
            id={`${ids.name}-transform`}
            className={inputClass}
            value={transform}
            onChange={(e) => setTransform(e.target.value)}
            aria-invalid={transformRefusal !== null}
            aria-describedby={transformRefusal ? `${ids.name}-transform-problem` : undefined}
          >
            <option value="">None</option>
            {(transformations.data ?? []).map((t) => (
              <option key={t.id} value={t.name}>
                {t.name} (v{t.version})
              </option>
            ))}
            {transform !== "" &&
              transformations.data !== undefined &&
              !transformations.data.some((t) => t.name === transform) && (
                <option value={transform}>{transform}</option>
              )}
          </select>
          {transformRefusal && (
            <span id={`${ids.name}-transform-problem`} className="text-bad">
              {transformRefusal}
            </span>
          )}
        </div>
        <div className="flex flex-col gap-1 text-sm">
          <label htmlFor={`${ids.name}-delay`} className="font-medium">
            Delay
          </label>
          <input
            id={`${ids.name}-delay`}
            className={`${inputClass} w-28`}
            placeholder="none"
            value={delay}
            onChange={(e) => {
              setDelay(e.target.value);
              if (save.error) save.reset();
            }}
            aria-invalid={delayRefusal !== null}
            aria-describedby={`${ids.name}-delay-help${delayRefusal ? ` ${ids.name}-delay-problem` : ""}`}
          />
          <span id={`${ids.name}-delay-help`} className="text-xs text-muted">
            30s, 5m, 2h; up to 24h
          </span>
          {delayRefusal && (
            <span id={`${ids.name}-delay-problem`} className="text-bad">
              {delayRefusal}
            </span>
          )}
        </div>
        <label className="mt-6 flex items-center gap-2 text-sm">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
          Enabled
        </label>
      </div>
      <div className="flex flex-col gap-1 text-sm">
        <label htmlFor={ids.filter} className="font-medium">
          Filter (JSON)
        </label>
        <p id={ids.help} className="text-xs text-muted">
          Conditions on <code>body</code>, <code>headers</code> and <code>query</code> with{" "}
          <code>
            $eq $neq $in $nin $gt $gte $lt $lte $exist $startsWith $endsWith $contains $or $and $not
          </code>
          ; empty: every event. Checked as you type.
        </p>
        <textarea
          id={ids.filter}
          className={`${inputClass} min-h-40 font-mono text-sm`}
          spellCheck={false}
          autoCapitalize="off"
          autoComplete="off"
          placeholder={EXAMPLE}
          value={text}
          onChange={(e) => {
            setText(e.target.value);
            if (save.error) save.reset();
          }}
          aria-invalid={filterProblem !== null}
          aria-describedby={`${ids.help} ${ids.problem}`}
          rows={Math.min(20, Math.max(6, text.split("\n").length + 1))}
        />
        <p id={ids.problem} className="min-h-5" data-testid="filter-status">
          {filterProblem ? (
            <span className="text-bad">
              <span aria-hidden="true">✗ </span>
              {filterProblem}
            </span>
          ) : checking ? (
            <span className="text-muted">Checking…</span>
          ) : probe.isSuccess ? (
            <span className="text-ok">
              <span aria-hidden="true">✓ </span>The filter is valid.
            </span>
          ) : null}
        </p>
      </div>
      <DedupeFields
        draft={dedupe}
        onChange={(draft) => {
          setDedupe(draft);
          if (save.error) save.reset();
        }}
        problems={dedupeRefusals}
      />
      <DryRunPanel
        webhook={webhook}
        route={probeName}
        filter={settledParse.ok ? settledParse.filter : undefined}
        enabled={enabled}
        last={last}
        onLast={setLast}
        dedupe={settledRule}
        transform={transform || null}
      />
      <div className="flex flex-wrap items-center gap-2">
        <Button type="submit" variant="primary" disabled={save.isPending || !destinationChoice}>
          {creating ? "Create route" : "Save route"}
        </Button>
        <Button onClick={onClose}>Cancel</Button>
        {fieldProblems(save.error).length > 0 && (
          <p role="alert" className="text-sm text-bad">
            Not saved: see the fields marked.
          </p>
        )}
      </div>
      {others.map((p) => (
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
