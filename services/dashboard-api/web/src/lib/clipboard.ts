import { announce } from "./announce";

/** Copy text; says so in the live region (and says when the browser refused). */
export async function copyText(text: string, what: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    announce(`${what} copied`);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    announce(ok ? `${what} copied` : `Could not copy ${what}`);
    return ok;
  }
}
