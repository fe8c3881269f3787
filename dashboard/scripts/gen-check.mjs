// Fails when src/api/schema.d.ts is not what `npm run gen` would write from
// the server's OpenAPI document (management/httpapi/openapi.json).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "wm-gen-"));
const out = join(dir, "schema.d.ts");
try {
  execFileSync(process.execPath, ["node_modules/openapi-typescript/bin/cli.js", "../management/httpapi/openapi.json", "-o", out], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const want = readFileSync(out, "utf8");
  const got = readFileSync("src/api/schema.d.ts", "utf8");
  if (want !== got) {
    console.error("src/api/schema.d.ts is stale: run `npm run gen` in dashboard/ and commit the result");
    process.exit(1);
  }
  console.log("src/api/schema.d.ts is up to date");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
