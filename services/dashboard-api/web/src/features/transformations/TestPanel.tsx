import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import { eventQuery } from "../../api/queries";
import type {
  EventDetail,
  Transformation,
  TransformationTestResult,
  TransformRequest,
} from "../../api/types";
import { Button, ErrorText, inputClass } from "../../components/ui";
import { announce } from "../../lib/announce";
import { bodyBytes } from "../../lib/format";
import { testTransformation } from "./api";
import { BodyDiff } from "./BodyDiff";

const SAMPLE = `{
  "headers": {"content-type": "application/json"},
  "body": {"id": 7, "type": "invoice.paid"},
  "query": "",
  "path": "/"
}`;

type Source = "event" | "request";

/** The request typed as JSON: an object of headers / body / query / path, or why not. */
function parseRequest(text: string): { request: TransformRequest } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (exc) {
    return { problem: `JSON syntax: ${exc instanceof Error ? exc.message : String(exc)}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return { problem: "A request is a JSON object of headers, body, query and path." };
  return { request: value as TransformRequest };
}

/** An event's body as its delivery sees it: parsed when its content type is JSON and it
 * parses, else the text (bytes that are not UTF-8 read as U+FFFD). */
export function eventBody(event: EventDetail): unknown {
  const text = new TextDecoder().decode(bodyBytes(event.request_body, event.request_body_encoding));
  const type = (event.content_type ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/json" || type.endsWith("+json")) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

type Run = { result: TransformationTestResult; input: unknown };

/** Test the saved transformation on one of the owner's events or on a request typed as JSON;
 * shows what it returned (the body as a diff against the input's), its console, its error
 * with line and column, and how long it took. Nothing is delivered. */
export function TestPanel({ transformation }: { transformation: Transformation }) {
  const client = useQueryClient();
  const [source, setSource] = useState<Source>("request");
  const [eventId, setEventId] = useState("");
  const [text, setText] = useState(SAMPLE);
  const [problem, setProblem] = useState<string | null>(null);
  const ids = { title: useId(), event: useId(), request: useId(), problem: useId() };
  const run = useMutation({
    mutationFn: async (): Promise<Run> => {
      if (source === "event") {
        const id = eventId.trim();
        const [result, event] = await Promise.all([
          testTransformation(transformation.name, { event_id: id }),
          client.fetchQuery(eventQuery(id)),
        ]);
        return { result, input: eventBody(event) };
      }
      const parsed = parseRequest(text);
      if ("problem" in parsed) throw new Error(parsed.problem);
      const result = await testTransformation(transformation.name, parsed);
      return { result, input: parsed.request.body ?? null };
    },
    onSuccess: ({ result }) =>
      announce(
        result.error
          ? `Test failed: ${result.error.message}`
          : `Test ran in ${result.duration_ms.toFixed(1)} ms`,
      ),
  });
  return (
    <section
      aria-labelledby={ids.title}
      className="space-y-3 rounded-lg border border-line bg-panel p-4"
    >
      <h2 id={ids.title} className="font-semibold">
        Test
      </h2>
      <p className="text-sm text-muted">
        Runs the saved version (v{transformation.version}) with its env; nothing is delivered. Save
        your changes first to test them.
      </p>
      <form
        aria-label="Test input"
        className="space-y-3"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (source === "request") {
            const parsed = parseRequest(text);
            setProblem("problem" in parsed ? parsed.problem : null);
            if ("problem" in parsed) return;
          } else if (!eventId.trim().startsWith("evt_")) {
            setProblem("An event ID starts with evt_ (copy it from the event's page).");
            return;
          } else {
            setProblem(null);
          }
          run.mutate();
        }}
      >
        <fieldset className="flex flex-wrap gap-4 text-sm">
          <legend className="mb-1 font-medium">Run on</legend>
          <label className="flex items-center gap-2">
            <input
              type="radio"
              name={`${ids.title}-source`}
              checked={source === "request"}
              onChange={() => setSource("request")}
            />
            A request (JSON)
          </label>
          <label className="flex items-center gap-2">
            <input
              type="radio"
              name={`${ids.title}-source`}
              checked={source === "event"}
              onChange={() => setSource("event")}
            />
            One of your events
          </label>
        </fieldset>
        {source === "event" ? (
          <div className="flex flex-col gap-1 text-sm">
            <label htmlFor={ids.event} className="font-medium">
              Event ID
            </label>
            <input
              id={ids.event}
              className={`${inputClass} w-96 font-mono`}
              placeholder="evt_…"
              value={eventId}
              onChange={(e) => setEventId(e.target.value)}
              aria-invalid={problem !== null}
              aria-describedby={problem ? ids.problem : undefined}
            />
          </div>
        ) : (
          <div className="flex flex-col gap-1 text-sm">
            <label htmlFor={ids.request} className="font-medium">
              Request (JSON: headers, body, query, path)
            </label>
            <textarea
              id={ids.request}
              className={`${inputClass} min-h-32 font-mono text-sm`}
              spellCheck={false}
              autoCapitalize="off"
              autoComplete="off"
              value={text}
              rows={Math.min(16, Math.max(6, text.split("\n").length + 1))}
              onChange={(e) => setText(e.target.value)}
              aria-invalid={problem !== null}
              aria-describedby={problem ? ids.problem : undefined}
            />
          </div>
        )}
        {problem && (
          <p id={ids.problem} className="text-sm text-bad">
            {problem}
          </p>
        )}
        <Button type="submit" variant="primary" disabled={run.isPending}>
          {run.isPending ? "Running…" : "Run test"}
        </Button>
      </form>
      <ErrorText error={run.error} />
      {run.data && <TestResult run={run.data} />}
    </section>
  );
}

function TestResult({ run }: { run: Run }) {
  const { result, input } = run;
  const error = result.error;
  const place =
    error?.line != null
      ? ` at line ${error.line}${error.column != null ? `, column ${error.column}` : ""}`
      : "";
  return (
    <div className="space-y-3" data-testid="test-result">
      <p role="status" className="text-sm">
        {error ? (
          <span className="text-bad">
            <span aria-hidden="true">✗ </span>
            Failed ({error.kind}){place}: {error.message}
          </span>
        ) : (
          <span className="text-ok">
            <span aria-hidden="true">✓ </span>
            Returned a request
          </span>
        )}{" "}
        <span className="text-muted">in {result.duration_ms.toFixed(1)} ms</span>
      </p>
      {result.request && (
        <>
          <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 text-sm">
            <dt className="text-muted">Path</dt>
            <dd className="font-mono">{result.request.path ?? "/"}</dd>
            <dt className="text-muted">Query</dt>
            <dd className="font-mono">{result.request.query || "—"}</dd>
            <dt className="text-muted">Headers</dt>
            <dd>
              {Object.keys(result.request.headers ?? {}).length === 0 ? (
                "none"
              ) : (
                <ul className="font-mono text-xs">
                  {Object.entries(result.request.headers ?? {}).map(([name, value]) => (
                    <li key={name} className="break-all">
                      {name}: {value}
                    </li>
                  ))}
                </ul>
              )}
            </dd>
          </dl>
          <BodyDiff before={input} after={result.request.body ?? null} />
        </>
      )}
      <div className="text-sm">
        <h3 className="font-medium">Console</h3>
        {result.logs.length === 0 ? (
          <p className="text-muted">Nothing printed.</p>
        ) : (
          <ol
            className="max-h-64 overflow-auto rounded border border-line bg-bg p-2 font-mono text-xs"
            data-testid="test-logs"
          >
            {result.logs.map((line, i) => (
              <li key={`${i.toString()}-${line}`} className="whitespace-pre-wrap break-all">
                {line}
              </li>
            ))}
          </ol>
        )}
      </div>
    </div>
  );
}
