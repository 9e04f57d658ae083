/** The filter text as typed: empty means no filter; otherwise a JSON object, or where the
 * syntax breaks (line and column, counted from 1). */
export type Parsed =
  | { ok: true; filter: Record<string, unknown> | null }
  | { ok: false; message: string; line?: number; column?: number };

function position(text: string, message: string): { line?: number; column?: number } {
  // V8: "... in JSON at position 12 (line 2 column 5)"; older: "at position 12"
  const lc = /line (\d+) column (\d+)/.exec(message);
  if (lc) return { line: Number(lc[1]), column: Number(lc[2]) };
  const at = /position (\d+)/.exec(message);
  if (!at) return {};
  const before = text.slice(0, Number(at[1])).split("\n");
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

export function parseFilter(text: string): Parsed {
  if (!text.trim()) return { ok: true, filter: null };
  try {
    const value: unknown = JSON.parse(text);
    if (value === null) return { ok: true, filter: null };
    if (typeof value !== "object" || Array.isArray(value))
      return { ok: false, message: 'A filter is a JSON object, e.g. {"body": {"type": "paid"}}.' };
    return { ok: true, filter: value as Record<string, unknown> };
  } catch (exc) {
    const raw = exc instanceof Error ? exc.message : String(exc);
    const message = raw
      .replace(/\s*\(line \d+ column \d+\)/, "")
      .replace(/ in JSON at position \d+/, "");
    return { ok: false, message, ...position(text, raw) };
  }
}
