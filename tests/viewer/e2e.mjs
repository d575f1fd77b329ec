// End-to-end test of `xpd view` and `xpd render` with headless Chromium driven by playwright-core
// (from viewer/node_modules; never downloads a browser). usage: node e2e.mjs XPD WORKDIR CHROMIUM
// WORKDIR/run must hold a generated run folder (make_run.py) with scene.json, WORKDIR/run-old one
// without it (a run written before scene.json existed).
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodePng, fractionDiffering } from './png.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(here, '../../viewer/package.json'));
const { chromium } = require('playwright-core');

const [xpd, work, chromiumPath] = process.argv.slice(2);
const run = join(work, 'run');
const BG = [0x1d, 0x20, 0x25];
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'];

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures++;
}

function startView(args) {
  return new Promise((resolveP, reject) => {
    const p = spawn(xpd, ['view', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => reject(new Error(`xpd view did not print a URL: ${out} ${err}`)), 15000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = /(http:\/\/\S+)/.exec(out);
      if (m) { clearTimeout(timer); resolveP({ proc: p, url: m[1], output: () => out + err }); }
    });
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`xpd view exited (${code}): ${out}${err}`)); });
  });
}

function rawGet(url, path) {
  // Raw request so that "..", "%2e%2e" reach the server unnormalized.
  const u = new URL(url);
  return new Promise((res, rej) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
    let data = '';
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('end', () => res({ status: Number(data.split(' ')[1]), head: data.split('\r\n\r\n')[0] }));
    s.on('error', rej);
  });
}

async function main() {
  // --- CLI errors
  const notRun = spawnSync(xpd, ['view', work, '--port', '0'], { encoding: 'utf8' });
  check(notRun.status !== 0 && /not an xpd run folder/.test(notRun.stderr), `view refuses a folder without frames (${notRun.stderr.trim().split('\n')[0]})`);

  const view = await startView([run, '--port', '0']);
  console.log(`server: ${view.url}`);
  const port = new URL(view.url).port;
  const taken = spawnSync(xpd, ['view', run, '--port', port], { encoding: 'utf8', timeout: 10000 });
  check(taken.status !== 0 && /already in use/.test(taken.stderr), `second server on port ${port} fails clearly (${taken.stderr.trim()})`);

  // --- HTTP
  for (const [path, status, type] of [['/', 200, 'text/html'], ['/viewer.js', 200, 'text/javascript'], ['/data/stats.json', 200, 'application/json'],
    ['/data/frames/0000.vtu', 200, 'application/octet-stream'], ['/data/index.json', 200, 'application/json'],
    ['/data/scene.json', 200, 'application/json'],
    ['/data/../run/stats.json', 403, null], ['/data/%2e%2e/%2e%2e/etc/passwd', 403, null], ['/..%2f..%2fetc/passwd', 403, null],
    ['/nope.js', 404, null], ['/data/frames/', 403, null]]) {
    const r = await rawGet(view.url, path);
    check(r.status === status && (!type || r.head.toLowerCase().includes(`content-type: ${type}`)), `GET ${path} -> ${r.status}${type ? ' ' + type : ''}`);
  }

  // --- Browser
  // playwright-core gives every launch a fresh, temporary user-data-dir.
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  await page.goto(view.url);
  await page.waitForFunction(() => window.__xpdReady || window.__xpdError, null, { timeout: 60000 });
  const err = await page.evaluate(() => window.__xpdError);
  check(!err, `viewer ready without error (${err || 'ok'})`);
  await page.waitForTimeout(500);
  const canvasPng = decodePng(await page.locator('#canvas3d').screenshot());
  const frac = fractionDiffering(canvasPng, BG);
  check(frac > 0.01 && frac < 0.99, `3D canvas ${canvasPng.width}x${canvasPng.height} shows geometry: ${(100 * frac).toFixed(1)}% of pixels differ from the background`);
  const plotKeys = await page.$$eval('#plots .plot', (els) => els.map((e) => e.dataset.key));
  for (const k of ['energy', 'residual', 'iterations', 'active_proxies', 'max_penetration', 'timings_ms (stacked)'])
    check(plotKeys.includes(k), `plot "${k}" present`);
  check((await page.$$('#plots .plot canvas')).length >= plotKeys.length, 'each plot has a canvas');
  const info = await page.textContent('#info');
  check(/768 tets/.test(info) && /320 boundary faces/.test(info), `boundary surface computed in JS (${info.trim()})`);
  check(/active/.test(info) && /embedded surface/.test(info), 'active field and embedded surface detected');

  // scene.json overlay: attachment legend, selection panel (all off), obstacles.
  const legend = await page.$$eval('#attachment-legend .overlay-row.attachment', (els) => els.map((e) => e.textContent));
  check(legend.length === 2 && legend[0] === 'fixed · clamp (25 nodes)' && legend[1] === 'rigid · tip (25 nodes)',
    `attachment legend: ${JSON.stringify(legend)}`);
  const swatches = await page.$$eval('#attachment-legend .swatch', (els) => els.map((e) => e.style.background));
  check(swatches.length === 2 && swatches[0] !== swatches[1], `one colour per attachment (${swatches.join(', ')})`);
  const selBoxes = await page.$$eval('#selection-panel .overlay-row.selection', (els) => els.map((e) => [e.dataset.name, e.querySelector('input').checked]));
  check(selBoxes.map((x) => x[0]).join() === 'clamp,tip,top' && selBoxes.every((x) => !x[1]), `selection panel, all off: ${JSON.stringify(selBoxes)}`);
  const ov = () => page.evaluate(() => {
    const o = window.__xpdScene.overlay;
    const pos = window.__xpdScene.body.geometry.attributes.position;
    return {
      attachments: o.attachmentPoints.map((p) => ({ visible: p.visible, n: p.geometry.index.count, follows: p.geometry.attributes.position === pos })),
      selections: o.selectionPoints.map((p) => p.visible),
      obstacles: o.obstacleGroup.children.map((m) => m.userData.obstacle),
    };
  });
  let st = await ov();
  check(st.attachments.length === 2 && st.attachments.every((a) => a.visible && a.n === 25 && a.follows),
    `attachment points drawn at the frame's node positions: ${JSON.stringify(st.attachments)}`);
  check(st.obstacles.join() === 'sphere,box,plane', `obstacles drawn: ${st.obstacles.join()}`);
  await page.click('#selection-panel .overlay-row[data-name="top"] input');
  st = await ov();
  check(st.selections.join() === 'false,false,true', `ticking "top" shows that selection only (${st.selections.join()})`);

  // Scrub, then play.
  await page.$eval('#slider', (s) => { s.value = '5'; s.dispatchEvent(new Event('input', { bubbles: true })); });
  await page.waitForFunction(() => /frame 5 /.test(document.getElementById('frame-label').textContent), null, { timeout: 10000 });
  const label5 = await page.$eval('#frame-label', (e) => e.textContent);
  check(/interactive: solver 40\.0 fps, residual left 5\.0e-3/.test(label5), `interactive run: solver fps and residual beside the frame (${label5})`);
  const cursorLeft = await page.$eval('.plot-cursor', (c) => parseFloat(c.style.left));
  check(Number.isFinite(cursorLeft) && cursorLeft > 0, `plot cursor moved to frame 5 (x=${cursorLeft})`);
  const shownBefore = await page.evaluate(() => window.__xpdStats.framesShown);
  await page.click('#play');
  await page.waitForTimeout(2500);
  await page.click('#play');
  const stats = await page.evaluate(() => window.__xpdStats);
  check(stats.framesShown - shownBefore >= 5, `playback advanced ${stats.framesShown - shownBefore} frames in 2.5 s`);
  check(stats.renderFps > 0 && /render \d+ fps/.test(await page.textContent('#fps')), `frame rate shown: ${await page.textContent('#fps')}`);
  check(consoleErrors.length === 0, `no browser console errors${consoleErrors.length ? ': ' + consoleErrors.join(' | ') : ''}`);

  view.proc.kill('SIGINT');
  const code = await new Promise((r) => view.proc.on('exit', (c) => r(c)));
  check(code === 0, `xpd view stops on Ctrl-C (exit ${code})`);

  // --- A run without scene.json (older runs): no overlay panel, no request for it, no console errors.
  const viewOld = await startView([join(work, 'run-old'), '--port', '0']);
  const oldPage = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  const oldErrors = [];
  const oldRequests = [];
  // Errors, and the viewer's own warnings (a scene.json problem would be one).
  oldPage.on('console', (m) => { if (m.type() === 'error' || (m.type() === 'warning' && /^xpd viewer/.test(m.text()))) oldErrors.push(m.text()); });
  oldPage.on('pageerror', (e) => oldErrors.push(String(e)));
  oldPage.on('request', (r) => oldRequests.push(new URL(r.url()).pathname));
  await oldPage.goto(viewOld.url);
  await oldPage.waitForFunction(() => window.__xpdReady || window.__xpdError, null, { timeout: 60000 });
  const oldErr = await oldPage.evaluate(() => window.__xpdError);
  const oldPanel = await oldPage.$eval('#overlay-panel', (e) => getComputedStyle(e).display);
  check(!oldErr && oldPanel === 'none' && (await oldPage.evaluate(() => window.__xpdScene.overlay)) === null,
    `run without scene.json: viewer ready, no overlay panel (${oldErr || 'ok'}, display ${oldPanel})`);
  check(!oldRequests.includes('/data/scene.json'), 'run without scene.json: scene.json not requested');
  check(oldErrors.length === 0, `run without scene.json: console clean${oldErrors.length ? ': ' + oldErrors.join(' | ') : ''}`);
  await browser.close();
  viewOld.proc.kill('SIGINT');
  await new Promise((r) => viewOld.proc.on('exit', r));

  // --- xpd render
  const png = join(work, 'frame0.png');
  const r1 = spawnSync(xpd, ['render', run, '--frame', '0', '--png', png], { encoding: 'utf8', timeout: 200000 });
  check(r1.status === 0 && existsSync(png), `xpd render --frame 0 (${(r1.stdout + r1.stderr).trim()})`);
  if (existsSync(png)) {
    const img = decodePng(readFileSync(png));
    const f = fractionDiffering(img, BG);
    check(img.width >= 1280 && img.height >= 720, `render PNG is ${img.width}x${img.height}`);
    check(f >= 0.02 && f <= 0.95, `render PNG: ${(100 * f).toFixed(1)}% of pixels differ from the background`);
  }
  const sheet = join(work, 'sheet.png');
  const r2 = spawnSync(xpd, ['render', run, '--frames', '0:7', '--sheet', sheet, '--width', '1200', '--height', '800'], { encoding: 'utf8', timeout: 200000 });
  check(r2.status === 0 && existsSync(sheet), `xpd render --frames 0:7 --sheet (${(r2.stdout + r2.stderr).trim()})`);
  if (existsSync(sheet)) {
    const img = decodePng(readFileSync(sheet));
    const f = fractionDiffering(img, BG);
    check(img.width === 1200 && img.height === 800 && f > 0.02 && f < 0.95, `sheet PNG ${img.width}x${img.height}, ${(100 * f).toFixed(1)}% non-background`);
  }
  const r3 = spawnSync(xpd, ['render', run, '--frame', '99', '--png', join(work, 'bad.png')], { encoding: 'utf8', timeout: 200000 });
  check(r3.status !== 0 && /frame 99 is not in the run/.test(r3.stderr) && !existsSync(join(work, 'bad.png')), `render of a missing frame fails clearly (${r3.stderr.trim()})`);

  console.log(failures === 0 ? 'viewer_e2e: all checks passed' : `viewer_e2e: ${failures} check(s) failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(1); });
