import { useMutation, useQueryClient } from "@tanstack/react-query";
import { lazy, Suspense, useId, useState } from "react";
import { ApiError, api, call, fieldProblem, fieldProblems } from "../../api/client";
import type { Transformation } from "../../api/types";
import { Button, ErrorText, inputClass } from "../../components/ui";
import { announce } from "../../lib/announce";
import { nameProblem } from "../../pages/Webhooks";
import { MASK } from "../destinations/api";
import { codeRefusal, TEMPLATE } from "./api";

// CodeMirror is a chunk of its own, fetched when an editor is first shown
const CodeEditor = lazy(() => import("./CodeEditor"));

type EnvRow = { key: number; name: string; value: string };
let rowKey = 0;
const envRow = (name = "", value = ""): EnvRow => ({ key: ++rowKey, name, value });

/** The env as typed; a stored value starts as the mask, which sent back keeps it. */
const envRows = (t: Transformation | null): EnvRow[] =>
  t ? Object.keys(t.env).map((name) => envRow(name, MASK)) : [];

const envOf = (rows: EnvRow[]): Record<string, string> =>
  Object.fromEntries(
    rows.filter((r) => r.name.trim() || r.value).map((r) => [r.name.trim(), r.value]),
  );

/** Create (no `transformation`) or edit one: name, code (a JavaScript editor; a refusal of the
 * code marks its line), env (values write-only). */
export function TransformationEditor({
  transformation,
  onSaved,
  onCancel,
}: {
  transformation: Transformation | null;
  onSaved?: (saved: Transformation) => void;
  onCancel?: () => void;
}) {
  const client = useQueryClient();
  const creating = transformation === null;
  const [name, setName] = useState("");
  const [code, setCode] = useState(transformation?.code ?? TEMPLATE);
  const [env, setEnv] = useState<EnvRow[]>(() => envRows(transformation));
  const [touched, setTouched] = useState(false);
  const ids = { title: useId(), name: useId(), code: useId(), help: useId(), problem: useId() };

  const save = useMutation({
    mutationFn: (): Promise<Transformation> =>
      creating
        ? call(() => api.POST("/api/v1/transformations", { body: { name, code, env: envOf(env) } }))
        : call(() =>
            api.PATCH("/api/v1/transformations/{trf}", {
              params: { path: { trf: transformation.name } },
              body: { code, env: envOf(env) },
            }),
          ),
    onSuccess: (saved) => {
      client.invalidateQueries({ queryKey: ["transformations"] });
      client.setQueryData(["transformations", saved.name], saved);
      announce(
        creating
          ? `Transformation ${saved.name} created`
          : `Transformation ${saved.name} saved (version ${saved.version})`,
      );
      if (!creating) setEnv(envRows(saved));
      onSaved?.(saved);
    },
  });

  const localName = creating && touched ? nameProblem(name) : null;
  const nameRefusal = localName ?? fieldProblem(save.error, "name");
  const refused = codeRefusal(save.error);
  const codeProblem = refused?.message ?? fieldProblem(save.error, "code");
  const envRefusal = fieldProblem(save.error, "env");
  const others = fieldProblems(save.error).filter(
    (p) => !["name", "code", "env"].includes(String(p.loc[0])),
  );
  const where = refused?.problem
    ? `Line ${refused.problem.line}${refused.problem.column ? `, column ${refused.problem.column}` : ""}: `
    : "";

  return (
    <form
      aria-labelledby={ids.title}
      className="space-y-3 rounded-lg border border-line bg-panel p-4"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!(creating && nameProblem(name))) save.mutate();
      }}
    >
      <h2 id={ids.title} className="font-semibold">
        {creating ? "New transformation" : `Code of ${transformation.name}`}
      </h2>
      {creating && (
        <div className="flex flex-col gap-1 text-sm">
          <label htmlFor={ids.name} className="font-medium">
            Name
          </label>
          <input
            id={ids.name}
            className={`${inputClass} w-80`}
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
        <span id={ids.code} className="font-medium">
          Code (JavaScript)
        </span>
        <p id={ids.help} className="text-xs text-muted">
          Register <code>addHandler('transform', (request, context) =&gt; request)</code> and return
          the request to deliver. Tab moves to the next field; indent with Ctrl+] and outdent with
          Ctrl+[. Checked when saved.
        </p>
        <Suspense
          fallback={
            <p role="status" className="text-muted">
              Loading the editor…
            </p>
          }
        >
          <CodeEditor
            value={code}
            onChange={(text) => {
              setCode(text);
              if (refused) save.reset();
            }}
            labelledBy={ids.code}
            describedBy={codeProblem ? `${ids.help} ${ids.problem}` : ids.help}
            problem={refused?.problem ?? null}
          />
        </Suspense>
        {codeProblem && (
          <p id={ids.problem} className="text-bad" data-testid="code-problem">
            <span aria-hidden="true">✗ </span>
            {where}
            {codeProblem}
          </p>
        )}
      </div>
      <fieldset className="space-y-2">
        <legend className="text-sm font-medium">Env (context.env)</legend>
        <p className="text-xs text-muted">
          Values your code reads as <code>context.env.NAME</code>, e.g. API keys. They are
          write-only: a stored one shows as {MASK} and is kept unless you replace it.
        </p>
        {env.map((r, i) => (
          <div key={r.key} className="flex flex-wrap items-center gap-2">
            <input
              aria-label={`Env ${i + 1} name`}
              className={`${inputClass} w-56 font-mono`}
              placeholder="API_KEY"
              value={r.name}
              onChange={(e) =>
                setEnv(env.map((o) => (o.key === r.key ? { ...o, name: e.target.value } : o)))
              }
            />
            <input
              aria-label={`Env ${i + 1} value`}
              className={`${inputClass} w-80 font-mono`}
              autoComplete="off"
              value={r.value}
              onFocus={(e) => e.target.value === MASK && e.target.select()}
              onChange={(e) =>
                setEnv(env.map((o) => (o.key === r.key ? { ...o, value: e.target.value } : o)))
              }
            />
            <Button
              aria-label={`Remove env ${r.name || i + 1}`}
              onClick={() => setEnv(env.filter((o) => o.key !== r.key))}
            >
              Remove
            </Button>
          </div>
        ))}
        <Button onClick={() => setEnv([...env, envRow()])}>Add env value</Button>
        {envRefusal && (
          <p className="text-sm text-bad" role="alert">
            {envRefusal}
          </p>
        )}
      </fieldset>
      <div className="flex flex-wrap items-center gap-2">
        <Button type="submit" variant="primary" disabled={save.isPending}>
          {creating ? "Create transformation" : "Save transformation"}
        </Button>
        {onCancel && <Button onClick={onCancel}>Cancel</Button>}
        {save.error instanceof ApiError && save.error.status === 422 && (
          <p role="alert" className="text-sm text-bad">
            {refused
              ? "Not saved: the code is refused (see above)."
              : "Not saved: see the fields marked."}
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
