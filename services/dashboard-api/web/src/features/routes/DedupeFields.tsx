import { useId } from "react";
import { fieldProblems } from "../../api/client";
import type { DedupePreset, DedupeRule } from "../../api/types";
import { inputClass } from "../../components/ui";

const PRESETS: { value: DedupePreset; label: string }[] = [
  { value: "github", label: "GitHub (X-GitHub-Delivery)" },
  { value: "stripe", label: "Stripe (body id)" },
  { value: "standard-webhooks", label: "Standard Webhooks (webhook-id)" },
  { value: "shopify", label: "Shopify (X-Shopify-Event-Id)" },
];

const UNITS = [
  { value: 86_400, label: "days" },
  { value: 3600, label: "hours" },
  { value: 60, label: "minutes" },
  { value: 1, label: "seconds" },
] as const;

/** The deduplication section of the route editor, as typed (not yet a rule). */
export type DedupeDraft = {
  mode: "none" | "preset" | "fields";
  preset: DedupePreset;
  fields: string;
  window: string;
  unit: number;
};

/** The editor's draft of a saved rule (none: deduplication off, a one-hour window offered). */
export function dedupeDraft(rule: DedupeRule | null | undefined): DedupeDraft {
  if (!rule) return { mode: "none", preset: "github", fields: "", window: "1", unit: 3600 };
  const unit = UNITS.find((u) => rule.window_s % u.value === 0)?.value ?? 1;
  return {
    mode: rule.preset ? "preset" : "fields",
    preset: rule.preset ?? "github",
    fields: (rule.fields ?? []).join(", "),
    window: String(rule.window_s / unit),
    unit,
  };
}

/** The rule the draft says (null: no deduplication). The server judges it: a window out of
 * range or a bad field path comes back as a 422 naming `dedupe`. */
export function dedupeRule(draft: DedupeDraft): DedupeRule | null {
  if (draft.mode === "none") return null;
  const window_s = Math.round(Number(draft.window) * draft.unit);
  if (draft.mode === "preset") return { window_s, preset: draft.preset };
  const fields = draft.fields
    .split(",")
    .map((f) => f.trim())
    .filter((f) => f !== "");
  return { window_s, fields };
}

/** A rule in a few words: "github, 1 hour" or "body.id, headers.x-a, 90 seconds". */
export function dedupeSummary(rule: DedupeRule): string {
  const { window, unit } = dedupeDraft(rule);
  const label = UNITS.find((u) => u.value === unit)?.label ?? "seconds";
  const source = rule.preset ?? (rule.fields ?? []).join(", ");
  return `${source}, ${window} ${window === "1" ? label.slice(0, -1) : label}`;
}

/** The refusals of `dedupe` (under `prefix`, e.g. "route" in a dry run), each with its place. */
export function dedupeProblems(error: unknown, ...prefix: string[]): string[] {
  const at = [...prefix, "dedupe"];
  return fieldProblems(error)
    .filter((p) => at.every((part, i) => p.loc[i] === part))
    .map((p) => {
      const place = p.loc.slice(at.length).join(".");
      return place ? `${place}: ${p.msg}` : p.msg;
    });
}

/** A preset or fields making the key, and the window. */
export function DedupeFields({
  draft,
  onChange,
  problems,
}: {
  draft: DedupeDraft;
  onChange: (draft: DedupeDraft) => void;
  problems: string[];
}) {
  const id = useId();
  const set = (change: Partial<DedupeDraft>) => onChange({ ...draft, ...change });
  const invalid = problems.length > 0;
  const described = invalid ? `${id}-problem` : `${id}-help`;
  return (
    <fieldset className="space-y-2 rounded border border-line p-3 text-sm">
      <legend className="px-1 font-medium">Deduplication</legend>
      <p id={`${id}-help`} className="text-xs text-muted">
        Deliver only the first event with a given key within the window; later ones are recorded as
        duplicates and not sent. Replays are always delivered.
      </p>
      <div className="flex flex-wrap items-start gap-3">
        <div className="flex flex-col gap-1">
          <label htmlFor={`${id}-mode`} className="font-medium">
            Key
          </label>
          <select
            id={`${id}-mode`}
            className={inputClass}
            value={draft.mode}
            onChange={(e) => set({ mode: e.target.value as DedupeDraft["mode"] })}
            aria-describedby={described}
          >
            <option value="none">No deduplication</option>
            <option value="preset">A provider's event id</option>
            <option value="fields">Fields of the event</option>
          </select>
        </div>
        {draft.mode === "preset" && (
          <div className="flex flex-col gap-1">
            <label htmlFor={`${id}-preset`} className="font-medium">
              Provider
            </label>
            <select
              id={`${id}-preset`}
              className={inputClass}
              value={draft.preset}
              onChange={(e) => set({ preset: e.target.value as DedupePreset })}
              aria-invalid={invalid}
              aria-describedby={described}
            >
              {PRESETS.map((p) => (
                <option key={p.value} value={p.value}>
                  {p.label}
                </option>
              ))}
            </select>
          </div>
        )}
        {draft.mode === "fields" && (
          <div className="flex flex-col gap-1">
            <label htmlFor={`${id}-fields`} className="font-medium">
              Key fields
            </label>
            <input
              id={`${id}-fields`}
              className={`${inputClass} font-mono`}
              placeholder="body.id, headers.x-request-id"
              spellCheck={false}
              autoCapitalize="off"
              value={draft.fields}
              onChange={(e) => set({ fields: e.target.value })}
              aria-invalid={invalid}
              aria-describedby={described}
            />
          </div>
        )}
        {draft.mode !== "none" && (
          <div className="flex flex-col gap-1">
            <label htmlFor={`${id}-window`} className="font-medium">
              Window
            </label>
            <div className="flex gap-1">
              <input
                id={`${id}-window`}
                className={`${inputClass} w-24`}
                type="number"
                min={1}
                value={draft.window}
                onChange={(e) => set({ window: e.target.value })}
                aria-invalid={invalid}
                aria-describedby={described}
              />
              <select
                aria-label="Window unit"
                className={inputClass}
                value={draft.unit}
                onChange={(e) => set({ unit: Number(e.target.value) })}
              >
                {UNITS.map((u) => (
                  <option key={u.value} value={u.value}>
                    {u.label}
                  </option>
                ))}
              </select>
            </div>
          </div>
        )}
      </div>
      {invalid && (
        <div id={`${id}-problem`} className="text-bad">
          {problems.map((p) => (
            <p key={p}>{p}</p>
          ))}
        </div>
      )}
    </fieldset>
  );
}
