// Measures the viewer's playback frame rate in headless Chromium (playwright-core):
// usage: node measure_fps.mjs XPD RUN_FOLDER [SECONDS] [CHROMIUM] [SCREENSHOT.png]
// Starts `xpd view RUN --port 0`, opens the page, lets every frame load once, then plays at
// "max" speed and counts requestAnimationFrame callbacks (render fps) and frames advanced
// (playback frames/s) over SECONDS. Prints one JSON line.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = createRequire(resolve(here, '../../viewer/package.json'))('playwright-core');
const [xpd, run, secondsArg, chromiumArg, shot] = process.argv.slice(2);
const seconds = Number(secondsArg || 10);
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'];

const view = spawn(xpd, ['view', run, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((res, rej) => {
  let out = '';
  view.stdout.on('data', (d) => { out += d; const m = /(http:\/\/\S+)/.exec(out); if (m) res(m[1]); });
  view.on('exit', (c) => rej(new Error(`xpd view exited ${c}`)));
});
const browser = await chromium.launch({ executablePath: chromiumArg || '/usr/bin/chromium', headless: true, args: ARGS });
const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
// Baseline: requestAnimationFrame rate of an empty page in the same browser (compositor limit).
const blankFps = await page.evaluate(() => new Promise((res) => {
  let raf = 0;
  const start = performance.now();
  function count(now) { raf++; if (now - start < 3000) requestAnimationFrame(count); else res((raf * 1000) / (now - start)); }
  requestAnimationFrame(count);
}));
const t0 = Date.now();
await page.goto(url + (process.env.XPD_VIEW_QUERY || ''));
await page.waitForFunction(() => window.__xpdReady || window.__xpdError, null, { timeout: 120000 });
const firstFrameMs = Date.now() - t0;
const info = await page.textContent('#info');
await page.selectOption('#speed', '1000');
// Warm-up pass: play once through so every frame is fetched and parsed (cached afterwards).
await page.evaluate(() => window.__xpdPlay(true));
const nFrames = await page.$eval('#slider', (s) => Number(s.max) + 1);
await page.waitForFunction((n) => window.__xpdStats.framesShown >= n + 1, nFrames, { timeout: 300000, polling: 200 });
const warmMs = Date.now() - t0 - firstFrameMs;
const result = await page.evaluate((secs) => new Promise((res) => {
  let raf = 0;
  const shown0 = window.__xpdStats.framesShown;
  const start = performance.now();
  function count(now) {
    raf++;
    if (now - start < secs * 1000) requestAnimationFrame(count);
    else res({ renderFps: (raf * 1000) / (now - start), playbackFps: ((window.__xpdStats.framesShown - shown0) * 1000) / (now - start) });
  }
  requestAnimationFrame(count);
}), seconds);
const detail = await page.evaluate(() => ({ applyMs: window.__xpdStats.applyMs, drawMs: window.__xpdStats.drawMs, gl: window.__xpdStats.gl }));
const pageFps = await page.evaluate(() => window.__xpdStats.renderFps);
await page.evaluate(() => window.__xpdPlay(false));
if (shot) await page.screenshot({ path: shot });
await browser.close();
view.kill('SIGINT');
console.log(JSON.stringify({ mesh: info.trim(), frames: nFrames, firstFrameMs, warmUpMs: warmMs, seconds, ...result, pageRenderFps: pageFps, blankPageFps: blankFps, ...detail }));
process.exit(0);
