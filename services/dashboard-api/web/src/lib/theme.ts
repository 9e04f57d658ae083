// The theme follows the system unless the person chose one (kept in localStorage, read by
// /theme.js before the first paint).
export type ThemeChoice = "system" | "light" | "dark";
const KEY = "hookbay-theme";

export function themeChoice(): ThemeChoice {
  const saved = localStorage.getItem(KEY);
  return saved === "light" || saved === "dark" ? saved : "system";
}

export function applyTheme(choice: ThemeChoice): void {
  if (choice === "system") localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, choice);
  const dark =
    choice === "dark" ||
    (choice === "system" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
}

export function followSystem(): () => void {
  const query = matchMedia("(prefers-color-scheme: dark)");
  const changed = () => {
    if (themeChoice() === "system") applyTheme("system");
  };
  query.addEventListener("change", changed);
  return () => query.removeEventListener("change", changed);
}
