import tailwindcss from "@tailwindcss/vite";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// Built into the dashboard service's package (git-ignored, package data), served at "/".
export default defineConfig({
  plugins: [react(), tailwindcss()],
  base: "/",
  build: {
    outDir: "../src/hookbay_dashboard/static",
    emptyOutDir: true,
    manifest: true,
    assetsDir: "assets",
    sourcemap: false,
    target: "es2022",
  },
  server: {
    // `npm run dev` against a running dashboard API (make run)
    proxy: { "/api": "http://127.0.0.1:8081" },
  },
});
