// Before the first paint: the saved theme override ("light" / "dark"), else the system's.
(() => {
  let choice = null;
  try {
    choice = localStorage.getItem("hookbay-theme");
  } catch {}
  const dark =
    choice === "dark" || (choice !== "light" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
})();
