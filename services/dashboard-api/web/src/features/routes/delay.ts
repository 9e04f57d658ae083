/** A route's delay as typed: `30s`, `5m`, `2h` or a number of seconds; empty or 0 means none.
 * The range (up to 24 h) is the server's to judge. */
export type ParsedDelay = { ok: true; seconds: number | null } | { ok: false; message: string };

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600 };

export function parseDelay(text: string): ParsedDelay {
  const found = /^(\d+)\s*([smh]?)$/i.exec(text.trim());
  if (text.trim() === "") return { ok: true, seconds: null };
  if (!found) return { ok: false, message: "Give e.g. 30s, 5m, 2h or a number of seconds." };
  const seconds = Number(found[1]) * UNITS[(found[2] || "s").toLowerCase()];
  return { ok: true, seconds: seconds === 0 ? null : seconds };
}

/** Seconds in the largest unit that divides them: 300 → "5m", 90 → "90s". */
export function formatDelay(seconds: number | null | undefined): string {
  if (!seconds) return "";
  for (const [unit, size] of [
    ["h", 3600],
    ["m", 60],
  ] as const) {
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}
