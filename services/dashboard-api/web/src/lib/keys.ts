import { useEffect, useRef } from "react";

export type Shortcuts = Partial<
  Record<"/" | "j" | "k" | "Enter" | "Escape" | "r" | "c" | "?", () => void>
>;

function typing(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return (
    target.isContentEditable ||
    ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName) ||
    target.closest("dialog[open]") !== null
  );
}

/** Single-key shortcuts of a screen; inert while typing, in a dialog, or with a modifier. */
export function useShortcuts(shortcuts: Shortcuts): void {
  const current = useRef(shortcuts);
  current.current = shortcuts;
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
      const handler = current.current[event.key as keyof Shortcuts];
      if (!handler) return;
      // Enter on a focused link or button keeps its own meaning
      if (
        event.key === "Enter" &&
        event.target instanceof HTMLElement &&
        event.target.closest("a,button")
      )
        return;
      event.preventDefault();
      handler();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
}
