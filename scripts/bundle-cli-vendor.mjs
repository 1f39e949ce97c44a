// Bundles src/cli/vendor.ts (commander, cli-progress) into dist/cli/vendor.js, over the file tsc
// wrote there, so the installed package needs neither: `npm run build` runs this after tsc.
import { build } from "vite";

await build({
  configFile: false,
  logLevel: "warn",
  build: {
    ssr: "src/cli/vendor.ts",
    outDir: "dist/cli",
    emptyOutDir: false,
    minify: false,
    target: "node20",
    rollupOptions: { output: { entryFileNames: "vendor.js", format: "es" } },
  },
  ssr: { noExternal: true, target: "node" },
});
