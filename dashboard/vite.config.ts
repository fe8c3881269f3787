import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The dashboard is served by netbird-server at / on the API's origin; in
// development, `npm run dev` proxies /api, /oauth2 and the config file to
// the server named by WIREMESH_URL (default http://127.0.0.1:33073).
const target = process.env.WIREMESH_URL ?? "http://127.0.0.1:33073";

export default defineConfig({
  plugins: [react()],
  build: { target: "es2022", sourcemap: false, chunkSizeWarningLimit: 800 },
  server: {
    proxy: {
      "/api": target,
      "/oauth2": target,
      "/dashboard-config.json": target,
    },
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.ts"],
  },
});
