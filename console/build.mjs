// Bundles the console's script (src/app.js) with the TypeScript client it calls
// (../clients/typescript/src) and openapi-fetch into one ES module, static/app.js, which
// loomd embeds. `make console` runs it; `node build.mjs --outfile PATH` writes elsewhere
// (the suite's staleness test compares that with the committed bundle).
//
// The output must be the same bytes on every machine: no minifying (the committed bundle
// stays readable in a diff), no source map, paths relative to this folder, symlinks kept
// as they are (the suite links node_modules from a cache), and openapi-fetch resolved from
// this folder's node_modules (package-lock.json pins it) even where clients/typescript
// has its own.
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = fileURLToPath(new URL(".", import.meta.url));
const { values } = parseArgs({ options: { outfile: { type: "string", default: "static/app.js" } } });

await esbuild.build({
  absWorkingDir: here,
  entryPoints: ["src/app.js"],
  outfile: values.outfile,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  charset: "utf8",
  legalComments: "inline",
  preserveSymlinks: true,
  alias: { "openapi-fetch": "openapi-fetch" },
  banner: { js: "// Built by `make console` from console/src and clients/typescript/src (console/build.mjs): do not edit." },
  logLevel: "warning",
});
