import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, call } from "../api/client";
import type { VerificationType, VerificationWrite, Webhook } from "../api/types";
import { Button, ErrorText, Field, inputClass, Time } from "../components/ui";
import { announce } from "../lib/announce";

type Mode = "enforce" | "record";

/** Every preset, in the order the docs list them (docs/owners/verification.md). */
export const VERIFICATION_TYPES: { value: VerificationType; label: string }[] = [
  { value: "hookbay", label: "hookbay (X-Service-Signature)" },
  { value: "standard-webhooks", label: "Standard Webhooks" },
  { value: "stripe", label: "Stripe" },
  { value: "github", label: "GitHub" },
  { value: "shopify", label: "Shopify" },
  { value: "slack", label: "Slack" },
  { value: "twilio", label: "Twilio" },
  { value: "zoom", label: "Zoom" },
  { value: "meta", label: "Meta (WhatsApp, Messenger, Instagram)" },
  { value: "paddle", label: "Paddle" },
  { value: "linear", label: "Linear" },
  { value: "pagerduty", label: "PagerDuty" },
  { value: "typeform", label: "Typeform" },
  { value: "intercom", label: "Intercom" },
  { value: "square", label: "Square" },
  { value: "gitlab", label: "GitLab" },
  { value: "sendgrid", label: "SendGrid" },
  { value: "mailgun", label: "Mailgun" },
  { value: "x", label: "X (Twitter)" },
  { value: "hmac", label: "Generic HMAC" },
  { value: "basic", label: "HTTP Basic" },
  { value: "api-key", label: "API key header" },
  { value: "none", label: "None (record only that nothing is checked)" },
];

const NO_SECRET = new Set<VerificationType>(["sendgrid", "basic", "api-key", "none"]);
const TIMESTAMPED = new Set<VerificationType>([
  "standard-webhooks",
  "stripe",
  "slack",
  "zoom",
  "paddle",
  "linear",
  "sendgrid",
  "mailgun",
  "hmac",
]);
const SECRET_LABEL: Partial<Record<VerificationType, string>> = {
  twilio: "Auth token",
  meta: "App secret",
  slack: "Signing secret",
  zoom: "Secret token",
  gitlab: "Secret token",
  square: "Signature key",
  mailgun: "HTTP webhook signing key",
  x: "Consumer secret",
  intercom: "Client secret",
  shopify: "App client secret",
};

/** What the form holds; secrets start empty (write-only: empty keeps the stored one). */
type Draft = {
  type: VerificationType | "";
  mode: Mode;
  secret: string;
  keep: string;
  tolerance: string;
  publicUrl: string;
  verifyToken: string;
  publicKey: string;
  hmacHeader: string;
  hmacAlgorithm: "sha1" | "sha256" | "sha512";
  hmacEncoding: "hex" | "base64";
  hmacPrefix: string;
  hmacPayload: string;
  hmacTimestampHeader: string;
  basicUsername: string;
  basicPassword: string;
  apiKeyHeader: string;
  apiKeyValue: string;
};

function draftOf(hook: Webhook): Draft {
  const v = hook.verification;
  return {
    type: v?.type ?? (hook.secret ? "hookbay" : ""),
    mode: v?.mode ?? "enforce",
    secret: "",
    keep: "86400",
    tolerance: v?.tolerance_s == null ? "" : String(v.tolerance_s),
    publicUrl: v?.public_url ?? "",
    verifyToken: "",
    publicKey: v?.public_key ?? "",
    hmacHeader: v?.hmac?.header ?? "",
    hmacAlgorithm: v?.hmac?.algorithm ?? "sha256",
    hmacEncoding: v?.hmac?.encoding ?? "hex",
    hmacPrefix: v?.hmac?.prefix ?? "",
    hmacPayload: v?.hmac?.payload ?? "{body}",
    hmacTimestampHeader: v?.hmac?.timestamp_header ?? "",
    basicUsername: v?.basic?.username ?? "",
    basicPassword: "",
    apiKeyHeader: v?.api_key?.header ?? "",
    apiKeyValue: "",
  };
}

/** The PATCH body: every shown field, secrets only when typed (an empty one keeps the stored). */
function bodyOf(d: Draft, type: VerificationType, hasSecret: boolean): VerificationWrite {
  const body: VerificationWrite = { type, mode: d.mode };
  // basic and api-key: the password or key plays the secret's part, in a rotation too
  const replaced = type === "basic" ? d.basicPassword : type === "api-key" ? d.apiKeyValue : "";
  if (!NO_SECRET.has(type) && d.secret) body.secret = d.secret;
  if (hasSecret && (body.secret || replaced) && Number(d.keep) > 0)
    body.keep_previous_for_s = Number(d.keep);
  if (TIMESTAMPED.has(type)) body.tolerance_s = d.tolerance === "" ? null : Number(d.tolerance);
  if (type === "twilio" || type === "square") body.public_url = d.publicUrl || null;
  if (type === "meta" && d.verifyToken) body.verify_token = d.verifyToken;
  if (type === "sendgrid") body.public_key = d.publicKey || null;
  if (type === "hmac")
    body.hmac = {
      header: d.hmacHeader,
      algorithm: d.hmacAlgorithm,
      encoding: d.hmacEncoding,
      prefix: d.hmacPrefix,
      payload: d.hmacPayload,
      timestamp_header: d.hmacTimestampHeader || null,
    };
  if (type === "basic")
    body.basic = { username: d.basicUsername, password: d.basicPassword || undefined };
  if (type === "api-key")
    body.api_key = { header: d.apiKeyHeader, value: d.apiKeyValue || undefined };
  return body;
}

/** A one-line description of how the webhook's requests are verified. */
export function verificationSummary(hook: Webhook): string {
  const v = hook.verification;
  if (v) {
    const preset = VERIFICATION_TYPES.find((t) => t.value === v.type)?.label ?? v.type;
    return `Verified: ${preset}${v.mode === "record" ? " (record only)" : ""}`;
  }
  return hook.secret ? "Signed (secret set)" : "Unsigned (no secret)";
}

function TextField({
  label,
  value,
  onChange,
  secret,
  stored,
  placeholder,
  wide,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  secret?: boolean;
  stored?: boolean;
  placeholder?: string;
  wide?: boolean;
}) {
  return (
    <Field label={label}>
      <input
        className={`${inputClass} ${wide ? "w-96" : "w-64"}`}
        type={secret ? "password" : "text"}
        autoComplete={secret ? "new-password" : "off"}
        value={value}
        placeholder={secret && stored ? "•••••••• (set; leave empty to keep)" : placeholder}
        onChange={(e) => onChange(e.target.value)}
      />
    </Field>
  );
}

/** The webhook's Verification section: preset, mode, write-only secret, tolerance, rotation
 * overlap, and the fields only some presets need. */
export function VerificationSettings({ hook, onDone }: { hook: Webhook; onDone: () => void }) {
  const client = useQueryClient();
  const [d, setD] = useState<Draft>(() => draftOf(hook));
  const set =
    <K extends keyof Draft>(key: K) =>
    (value: Draft[K]) =>
      setD((old) => ({ ...old, [key]: value }));
  const stored = hook.verification;
  const sameType = stored !== null && stored !== undefined && stored.type === d.type;
  const plainHookbay = !stored && !!hook.secret && d.type === "hookbay";
  const hasCredential = sameType && (!!stored.basic || !!stored.api_key);
  const hasSecret = (sameType && stored.secret !== null) || plainHookbay || hasCredential;
  const save = useMutation({
    mutationFn: async () => {
      const verification = d.type === "" ? null : bodyOf(d, d.type, hasSecret);
      // "Not verified" also drops a plain secret (it would verify as type hookbay)
      const body = verification || !hook.secret ? { verification } : { verification, secret: null };
      await call(() =>
        api.PATCH("/api/v1/webhooks/{name}", { params: { path: { name: hook.name } }, body }),
      );
      return verification ? "Verification saved" : "Verification removed";
    },
    onSuccess: (message) => {
      client.invalidateQueries({ queryKey: ["webhooks"] });
      announce(message);
      onDone();
    },
  });
  const type = d.type;
  return (
    <form
      className="space-y-3 rounded border border-line p-3"
      aria-label={`Verification of ${hook.name}`}
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <h4 className="font-semibold">Verification</h4>
      <div className="flex flex-wrap items-end gap-3">
        <Field label="Type">
          <select
            className={inputClass}
            value={type}
            onChange={(e) => set("type")(e.target.value as Draft["type"])}
          >
            <option value="">Not verified</option>
            {VERIFICATION_TYPES.map((t) => (
              <option key={t.value} value={t.value}>
                {t.label}
              </option>
            ))}
          </select>
        </Field>
        {type !== "" && (
          <Field label="Mode">
            <select
              className={inputClass}
              value={d.mode}
              onChange={(e) => set("mode")(e.target.value as Mode)}
            >
              <option value="enforce">Enforce (refuse with 401)</option>
              <option value="record">Record (accept, note the verdict)</option>
            </select>
          </Field>
        )}
        {type !== "" && !NO_SECRET.has(type) && (
          <TextField
            label={SECRET_LABEL[type] ?? "Secret"}
            value={d.secret}
            onChange={set("secret")}
            secret
            stored={hasSecret}
          />
        )}
        {type !== "" && hasSecret && (
          <Field label="Keep previous secret for (seconds)">
            <input
              className={`${inputClass} w-40`}
              type="number"
              min={0}
              value={d.keep}
              onChange={(e) => set("keep")(e.target.value)}
            />
          </Field>
        )}
        {type !== "" && TIMESTAMPED.has(type) && (
          <Field label="Tolerance (seconds; empty: the preset's default)">
            <input
              className={`${inputClass} w-40`}
              type="number"
              min={0}
              value={d.tolerance}
              onChange={(e) => set("tolerance")(e.target.value)}
            />
          </Field>
        )}
      </div>
      {(type === "twilio" || type === "square") && (
        <TextField
          label="Public URL (the URL the sender signs)"
          value={d.publicUrl}
          onChange={set("publicUrl")}
          placeholder={hook.url}
          wide
        />
      )}
      {type === "meta" && (
        <TextField
          label="Verify token"
          value={d.verifyToken}
          onChange={set("verifyToken")}
          secret
          stored={sameType && stored.verify_token !== null}
        />
      )}
      {type === "sendgrid" && (
        <TextField
          label="Public key (base64 DER)"
          value={d.publicKey}
          onChange={set("publicKey")}
          wide
        />
      )}
      {type === "hmac" && (
        <div className="flex flex-wrap items-end gap-3">
          <TextField label="Signature header" value={d.hmacHeader} onChange={set("hmacHeader")} />
          <Field label="Algorithm">
            <select
              className={inputClass}
              value={d.hmacAlgorithm}
              onChange={(e) => set("hmacAlgorithm")(e.target.value as Draft["hmacAlgorithm"])}
            >
              <option value="sha256">SHA-256</option>
              <option value="sha512">SHA-512</option>
              <option value="sha1">SHA-1</option>
            </select>
          </Field>
          <Field label="Encoding">
            <select
              className={inputClass}
              value={d.hmacEncoding}
              onChange={(e) => set("hmacEncoding")(e.target.value as Draft["hmacEncoding"])}
            >
              <option value="hex">hex</option>
              <option value="base64">base64</option>
            </select>
          </Field>
          <TextField label="Prefix" value={d.hmacPrefix} onChange={set("hmacPrefix")} />
          <TextField label="Payload" value={d.hmacPayload} onChange={set("hmacPayload")} />
          <TextField
            label="Timestamp header"
            value={d.hmacTimestampHeader}
            onChange={set("hmacTimestampHeader")}
          />
        </div>
      )}
      {type === "basic" && (
        <div className="flex flex-wrap items-end gap-3">
          <TextField label="Username" value={d.basicUsername} onChange={set("basicUsername")} />
          <TextField
            label="Password"
            value={d.basicPassword}
            onChange={set("basicPassword")}
            secret
            stored={sameType && !!stored.basic}
          />
        </div>
      )}
      {type === "api-key" && (
        <div className="flex flex-wrap items-end gap-3">
          <TextField label="Header" value={d.apiKeyHeader} onChange={set("apiKeyHeader")} />
          <TextField
            label="Value"
            value={d.apiKeyValue}
            onChange={set("apiKeyValue")}
            secret
            stored={sameType && !!stored.api_key}
          />
        </div>
      )}
      {stored?.previous && (
        <p className="text-sm text-muted">
          The previous secret is accepted until <Time iso={stored.previous.expires_at} />.
        </p>
      )}
      <div className="flex gap-2">
        <Button type="submit" variant="primary" disabled={save.isPending}>
          Save verification
        </Button>
        <Button onClick={onDone}>Cancel</Button>
      </div>
      <ErrorText error={save.error} />
    </form>
  );
}
