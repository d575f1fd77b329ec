// Bundles the viewer into a self-contained folder (no CDN): viewer.js, index.html, style.css,
// uPlot.min.css. Usage: node build.mjs [OUTDIR] (default: dist next to this file).
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, 'dist'));
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(here, 'src', 'main.js')],
  bundle: true,
  format: 'iife',
  target: 'es2020',
  minify: true,
  sourcemap: true,
  legalComments: 'linked',
  outfile: join(out, 'viewer.js'),
  logLevel: 'warning',
});
copyFileSync(join(here, 'index.html'), join(out, 'index.html'));
copyFileSync(join(here, 'style.css'), join(out, 'style.css'));
copyFileSync(join(here, 'node_modules', 'uplot', 'dist', 'uPlot.min.css'), join(out, 'uPlot.min.css'));
console.log(`viewer bundled into ${out}`);
