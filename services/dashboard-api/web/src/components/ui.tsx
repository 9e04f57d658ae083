import { type ReactNode, useEffect, useRef, useState } from "react";
import { ApiError } from "../api/client";
import type { Status } from "../api/types";
import { copyText } from "../lib/clipboard";
import { localTime, utcTime } from "../lib/format";

const STATUS: Record<Status, { icon: string; label: string; className: string }> = {
  success: { icon: "✓", label: "Success", className: "text-ok" },
  failed: { icon: "✗", label: "Failed", className: "text-bad" },
  pending: { icon: "◷", label: "Pending", className: "text-wait" },
};

/** Status as an icon and a word, never by colour alone. */
export function StatusBadge({ status }: { status: Status }) {
  const s = STATUS[status];
  return (
    <span className={`inline-flex items-center gap-1 font-medium ${s.className}`}>
      <span aria-hidden="true">{s.icon}</span>
      {s.label}
    </span>
  );
}

export function Signature({ valid }: { valid: boolean | null }) {
  if (valid === null) return <span title="No secret set">— none</span>;
  return valid ? (
    <span className="text-ok">
      <span aria-hidden="true">✓ </span>valid
    </span>
  ) : (
    <span className="text-bad">
      <span aria-hidden="true">✗ </span>invalid
    </span>
  );
}

export function Time({ iso }: { iso: string }) {
  return (
    <time dateTime={iso} title={utcTime(iso)}>
      {localTime(iso)}
    </time>
  );
}

export function Button({
  children,
  variant = "plain",
  className = "",
  ...props
}: React.ButtonHTMLAttributes<HTMLButtonElement> & { variant?: "plain" | "primary" | "danger" }) {
  const look = {
    plain: "border-line bg-panel hover:bg-hover",
    primary: "border-accent bg-accent text-on-accent hover:opacity-90",
    danger: "border-bad bg-panel text-bad hover:bg-hover",
  }[variant];
  return (
    <button
      type="button"
      className={`inline-flex items-center gap-1 rounded border px-3 py-1.5 text-sm disabled:opacity-60 ${look} ${className}`}
      {...props}
    >
      {children}
    </button>
  );
}

export function CopyButton({ text, what, label }: { text: string; what: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <Button
      onClick={async () => {
        setDone(await copyText(text, what));
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? "Copied" : (label ?? `Copy ${what}`)}
    </Button>
  );
}

/** A modal on the native <dialog>: focus kept inside, Esc closes, the page behind is inert. */
export function Modal({
  open,
  title,
  onClose,
  children,
}: {
  open: boolean;
  title: string;
  onClose: () => void;
  children: ReactNode;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      onClose={onClose}
      aria-labelledby="modal-title"
      className="m-auto w-full max-w-lg rounded-lg border border-line bg-panel p-5 text-fg backdrop:bg-black/50"
    >
      {open && (
        <>
          <h2 id="modal-title" className="mb-3 text-lg font-semibold">
            {title}
          </h2>
          {children}
        </>
      )}
    </dialog>
  );
}

export function Confirm({
  open,
  title,
  children,
  confirmLabel,
  danger,
  busy,
  onConfirm,
  onClose,
  disabled,
}: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  disabled?: boolean;
  onConfirm: () => void;
  onClose: () => void;
}) {
  return (
    <Modal open={open} title={title} onClose={onClose}>
      <div className="space-y-3">{children}</div>
      <div className="mt-4 flex justify-end gap-2">
        <Button onClick={onClose}>Cancel</Button>
        <Button
          variant={danger ? "danger" : "primary"}
          disabled={busy || disabled}
          onClick={onConfirm}
        >
          {busy ? "Working…" : confirmLabel}
        </Button>
      </div>
    </Modal>
  );
}

export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  const message =
    error instanceof ApiError
      ? error.status === 0
        ? "The API is unreachable."
        : `${error.error}: ${error.message}`
      : String(error);
  return (
    <p role="alert" className="text-bad text-sm">
      {message}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p role="status" className="text-muted">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return (
    <p className="rounded border border-dashed border-line p-6 text-center text-muted">
      {children}
    </p>
  );
}

type SparkPoint = { delivered: number; failed: number };

/** Delivered (bars up, ▲) against failed (bars down, ▼) per bucket, oldest first: told apart
 * by direction and the legend, not colour alone; the numbers are its text alternative. */
export function Sparkline({
  points,
  label,
  unit,
}: {
  points: SparkPoint[];
  label: string;
  unit: string;
}) {
  const max = Math.max(1, ...points.flatMap((p) => [p.delivered, p.failed]));
  const step = 3;
  const width = Math.max(points.length * step, 1);
  const half = 15;
  const delivered = points.map((p) => p.delivered);
  const failed = points.map((p) => p.failed);
  const quiet = delivered.every((n) => n === 0) && failed.every((n) => n === 0);
  const text = quiet
    ? `${label}: nothing delivered or failed`
    : `${label}, per ${unit}, oldest first: delivered ${delivered.join(", ")}; failed ${failed.join(", ")}`;
  return (
    <span className="inline-flex items-center gap-2">
      <svg
        role="img"
        aria-label={text}
        viewBox={`0 0 ${width} ${half * 2 + 1}`}
        preserveAspectRatio="none"
        className="h-8 w-48"
        data-testid="sparkline"
      >
        <rect x={0} y={half} width={width} height={1} className="fill-line" />
        {points.map((p, i) => (
          <g key={`b-${i.toString()}`}>
            {p.delivered > 0 && (
              <rect
                x={i * step}
                y={half - (p.delivered / max) * half}
                width={step - 1}
                height={(p.delivered / max) * half}
                className="fill-ok"
              />
            )}
            {p.failed > 0 && (
              <rect
                x={i * step}
                y={half + 1}
                width={step - 1}
                height={(p.failed / max) * half}
                className="fill-bad"
              />
            )}
          </g>
        ))}
      </svg>
      <span aria-hidden="true" className="flex flex-col text-xs leading-tight">
        <span className="text-ok">▲ delivered</span>
        <span className="text-bad">▼ failed</span>
      </span>
    </span>
  );
}

export function Field({
  label,
  children,
  hint,
}: {
  label: string;
  children: ReactNode;
  hint?: ReactNode;
}) {
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is the children
    <label className="flex flex-col gap-1 text-sm">
      <span className="font-medium">{label}</span>
      {children}
      {hint}
    </label>
  );
}

export const inputClass =
  "rounded border border-line bg-bg px-2 py-1.5 text-fg placeholder:text-muted aria-[invalid=true]:border-bad";

/** A secret value shown this once (a generated webhook secret, a new API token), with copy. */
export function ShownOnce({
  value,
  title,
  what,
  note,
  onClose,
}: {
  value: string | null;
  title: string;
  what: string;
  note: string;
  onClose: () => void;
}) {
  return (
    <Modal open={value !== null} title={title} onClose={onClose}>
      <p className="mb-2 text-sm">
        <strong>Shown this once.</strong> {note}
      </p>
      <code className="block break-all rounded border border-line bg-bg p-2 font-mono">
        {value}
      </code>
      <div className="mt-4 flex justify-end gap-2">
        {value && <CopyButton text={value} what={what} />}
        <Button onClick={onClose}>Done</Button>
      </div>
    </Modal>
  );
}
