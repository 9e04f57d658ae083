import { Link } from "@tanstack/react-router";
import type { Delivery } from "../../api/types";
import { CopyButton } from "../../components/ui";

/** What each delivery's transformation did: which one and its version, the SHA-256 of the body
 * it sent (shortened; the copy is whole), and its console output. Nothing without one. */
export function TransformTraces({ deliveries }: { deliveries: Delivery[] }) {
  const traced = deliveries.filter((d) => d.transform);
  if (traced.length === 0) return null;
  return (
    <section
      aria-labelledby="transform-traces-title"
      className="rounded-lg border border-line bg-panel p-4"
    >
      <h2 id="transform-traces-title" className="mb-2 font-semibold">
        Transformations
      </h2>
      <ul className="space-y-3">
        {traced.map((d) => {
          const t = d.transform;
          if (!t) return null;
          return (
            <li key={d.id} className="text-sm" data-testid="transform-trace">
              <p>
                Route <span className="font-mono">{d.route}</span> ran{" "}
                <Link to="/transformations/$trf" params={{ trf: t.name }} className="font-mono">
                  {t.name}
                </Link>{" "}
                {t.version > 0 ? `version ${t.version}` : "(it did not run)"}
              </p>
              <p className="flex flex-wrap items-center gap-2">
                <span className="text-muted">Body sent, SHA-256:</span>
                {t.body_sha256 ? (
                  <>
                    <code className="font-mono" title={t.body_sha256}>
                      {t.body_sha256.slice(0, 16)}…
                    </code>
                    <CopyButton text={t.body_sha256} what="SHA-256" label="Copy SHA-256" />
                  </>
                ) : (
                  <span>none (nothing was sent)</span>
                )}
              </p>
              <details className="mt-1">
                <summary className="cursor-pointer">
                  Console ({t.logs.length} {t.logs.length === 1 ? "line" : "lines"})
                </summary>
                {t.logs.length === 0 ? (
                  <p className="text-muted">Nothing printed.</p>
                ) : (
                  <ol className="mt-1 max-h-64 overflow-auto rounded border border-line bg-bg p-2 font-mono text-xs">
                    {t.logs.map((line, i) => (
                      <li key={`${i.toString()}-${line}`} className="whitespace-pre-wrap break-all">
                        {line}
                      </li>
                    ))}
                  </ol>
                )}
              </details>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
