// Display helpers: dates in the viewer's zone (UTC in the tooltip), sizes, bodies as bytes.

// timeStyle "long" carries the zone's name ("10:04:05 CET"): local time is never ambiguous
const local = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" });
const utc = new Intl.DateTimeFormat("en-GB", {
  dateStyle: "medium",
  timeStyle: "long",
  timeZone: "UTC",
});
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

export function localTime(iso: string): string {
  return local.format(new Date(iso));
}

export function utcTime(iso: string): string {
  return utc.format(new Date(iso));
}

export function ago(iso: string, now = Date.now()): string {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ];
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  }
  return relative.format(seconds, "second");
}

export function bytes(n: number | undefined | null): string {
  if (n === undefined || n === null) return "—";
  if (n < 1000) return `${n} B`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)} kB`;
  return `${(n / 1_000_000).toFixed(1)} MB`;
}

/** A duration in milliseconds: "250 ms", "2.5 s"; "—" for none. */
/** Seconds in at most two whole units: 30 s, 2 min, 30 min, 3 d, 1 d 12 h. */
export function duration(seconds: number): string {
  const units: [number, string][] = [
    [86_400, "d"],
    [3_600, "h"],
    [60, "min"],
    [1, "s"],
  ];
  const parts: string[] = [];
  let rest = Math.round(seconds);
  for (const [size, name] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)} ${name}`);
      rest %= size;
    }
  }
  return parts.length ? parts.join(" ") : "0 s";
}

export function millis(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

/** A latency quantile read from the stats' histogram: at most the bound of its bin ("≤ 250 ms"),
 * or "> 10 s" when it falls in the last bin, which has no upper bound. */
export function quantile(
  value: number | null,
  q: number,
  latency: { count: number; histogram: { le_ms: number | null; count: number }[] },
): string {
  if (value === null) return "—";
  const last = latency.histogram[latency.histogram.length - 1];
  const slowest = latency.histogram[latency.histogram.length - 2]?.le_ms ?? value;
  if (last && last.le_ms === null && latency.count - last.count < q * latency.count) {
    return `> ${millis(slowest)}`;
  }
  return `≤ ${millis(value)}`;
}

export function percent(rate: number | null | undefined): string {
  return rate === null || rate === undefined ? "—" : `${(rate * 100).toFixed(1)} %`;
}

/** The exact bytes of a stored body (`utf8` text or `base64`). */
export function bodyBytes(text: string, encoding: string): Uint8Array {
  if (encoding === "base64") {
    const raw = atob(text);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  return new TextEncoder().encode(text);
}

export function base64(data: Uint8Array): string {
  let raw = "";
  for (let i = 0; i < data.length; i += 0x8000) {
    raw += String.fromCharCode(...data.subarray(i, i + 0x8000));
  }
  return btoa(raw);
}

/** Offset / hex / ASCII lines, 16 bytes each. */
export function hexDump(data: Uint8Array, maxLines: number): { lines: string[]; more: boolean } {
  const lines: string[] = [];
  const total = Math.ceil(data.length / 16);
  for (let line = 0; line < Math.min(total, maxLines); line++) {
    const chunk = data.subarray(line * 16, line * 16 + 16);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) =>
      b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".",
    ).join("");
    lines.push(`${(line * 16).toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return { lines, more: total > maxLines };
}

/** A single-quoted shell word: exactly these characters, nothing expanded. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

const NOT_REPLAYED = new Set([
  "host",
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-connection",
  "expect",
  "accept-encoding",
]);

/** A curl command that sends the event again: the same body bytes (binary through base64) and
 * the same headers (signature included, so it verifies), to the webhook's receiving URL. */
export function curlFor(
  url: string,
  headers: Record<string, string>,
  body: string,
  encoding: string,
): string {
  const parts = ["curl -sS -X POST", shellQuote(url)];
  for (const [name, value] of Object.entries(headers)) {
    if (!NOT_REPLAYED.has(name.toLowerCase())) parts.push("-H", shellQuote(`${name}: ${value}`));
  }
  parts.push("--data-binary @-");
  const data = bodyBytes(body, encoding);
  // printf's argument cannot hold a NUL byte: such bodies go through base64 too
  const binary = encoding === "base64" || data.includes(0);
  const feed = binary
    ? `printf '%s' ${shellQuote(base64(data))} | base64 -d`
    : `printf '%s' ${shellQuote(body)}`;
  return `${feed} | ${parts.join(" ")}`;
}

/** A sample request signed at run time with the secret in $HOOKBAY_SECRET (secrets are
 * write-only: the dashboard never has it after it was shown once). */
export function sampleCurl(url: string, signed: boolean): string {
  const body = '{"hello":"world"}';
  if (!signed) {
    return `curl -sS -X POST ${shellQuote(url)} -H 'Content-Type: application/json' --data-binary ${shellQuote(body)}`;
  }
  return [
    `BODY=${shellQuote(body)}`,
    `SIG=$(printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$HOOKBAY_SECRET" | sed 's/^.* //')`,
    `curl -sS -X POST ${shellQuote(url)} -H 'Content-Type: application/json' -H "X-Service-Signature: sha256=$SIG" --data-binary "$BODY"`,
  ].join("\n");
}

export type BodyKind = "json" | "xml" | "form" | "text" | "binary";

export function bodyKind(contentType: string | null, body: string, encoding: string): BodyKind {
  if (encoding === "base64") return "binary";
  const type = (contentType ?? "").toLowerCase();
  if (type.includes("json")) return "json";
  if (type.includes("xml")) return "xml";
  if (type.includes("x-www-form-urlencoded")) return "form";
  const start = body.trimStart()[0];
  if (start === "{" || start === "[") return "json";
  if (start === "<") return "xml";
  return "text";
}

/** XML re-indented as text (never parsed into the DOM). */
export function indentXml(xml: string): string {
  const tokens = xml.replace(/>\s*</g, "><").split(/(?=<)|(?<=>)/);
  let depth = 0;
  const lines: string[] = [];
  for (const token of tokens) {
    if (!token.trim()) continue;
    if (token.startsWith("</")) depth = Math.max(0, depth - 1);
    lines.push("  ".repeat(depth) + token);
    if (
      token.startsWith("<") &&
      !token.startsWith("</") &&
      !token.startsWith("<?") &&
      !token.startsWith("<!") &&
      !token.endsWith("/>")
    ) {
      depth++;
    }
  }
  // an element whose text sits on its own line closes at the same depth it opened
  return lines.join("\n");
}
