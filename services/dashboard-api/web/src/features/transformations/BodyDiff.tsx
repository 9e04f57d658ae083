import { diffLines } from "diff";
import { useId } from "react";

/** A body as the diff shows it: a string as it is, anything else as indented JSON. */
export function bodyText(body: unknown): string {
  if (typeof body === "string") return body;
  if (body === undefined) return "";
  return JSON.stringify(body, null, 2);
}

type Line = { kind: "added" | "removed" | "same"; text: string };

function lines(before: string, after: string): Line[] {
  return diffLines(before, after).flatMap((part) => {
    const kind = part.added ? "added" : part.removed ? "removed" : "same";
    const text = part.value.endsWith("\n") ? part.value.slice(0, -1) : part.value;
    return text.split("\n").map((line) => ({ kind, text: line }) as Line);
  });
}

const MARK = { added: "+", removed: "−", same: " " } as const;
const LOOK = {
  added: "diff-added",
  removed: "diff-removed",
  same: "",
} as const;

/** The output body against the input body, line by line: added lines start with +, removed
 * ones with − (and are <ins> / <del>), never told by colour alone; a summary for screen
 * readers says how many of each. */
export function BodyDiff({ before, after }: { before: unknown; after: unknown }) {
  const summaryId = useId();
  const rows = lines(bodyText(before), bodyText(after));
  const added = rows.filter((r) => r.kind === "added").length;
  const removed = rows.filter((r) => r.kind === "removed").length;
  const summary =
    added === 0 && removed === 0
      ? "The body is unchanged."
      : `${added} ${added === 1 ? "line" : "lines"} added, ${removed} ${removed === 1 ? "line" : "lines"} removed.`;
  return (
    <figure aria-describedby={summaryId} className="space-y-1">
      <figcaption className="text-sm font-medium">
        Body: output against input <span className="font-normal text-muted">{summary}</span>
      </figcaption>
      <p id={summaryId} className="sr-only">
        {summary} Added lines start with plus, removed lines with minus.
      </p>
      <pre
        className="max-h-96 overflow-auto rounded border border-line bg-bg p-2 font-mono text-xs"
        data-testid="body-diff"
      >
        {rows.map((row, i) => {
          // the mark is seen, the word is heard: never the colour alone
          const line = (said: string) => (
            <>
              <span aria-hidden="true" className="select-none">
                {MARK[row.kind]}{" "}
              </span>
              {said && <span className="sr-only">{said}</span>}
              {row.text}
            </>
          );
          const key = `${i.toString()}-${row.kind}`;
          if (row.kind === "added")
            return (
              <ins key={key} className={`block no-underline ${LOOK.added}`} data-diff="added">
                {line("added: ")}
              </ins>
            );
          if (row.kind === "removed")
            return (
              <del key={key} className={`block no-underline ${LOOK.removed}`} data-diff="removed">
                {line("removed: ")}
              </del>
            );
          return (
            <span key={key} className="block">
              {line("")}
            </span>
          );
        })}
      </pre>
    </figure>
  );
}
