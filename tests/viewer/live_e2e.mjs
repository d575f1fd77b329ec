// End-to-end test of the live viewer (`xpd view --live`) in headless Chromium driven by
// playwright-core: a person's incision, made with real mouse clicks on the slab of
// tests/viewer/live_slab.json (under lateral tension), goes through the page's picking, the POST to
// /api/event and the session; the page then follows the new frame, whose topology changed (more
// nodes, more boundary faces) and whose wound opened (every split node pair apart). A hook follows,
// then its Release button lets go of it; the session's events.json replayed by `xpd run --events`
// gives the same last frame.
// usage: node live_e2e.mjs XPD WORKDIR CHROMIUM SCENE
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseVtu } from '../../viewer/src/vtu.js';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(here, '../../viewer/package.json'));
const { chromium } = require('playwright-core');
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'];

const [xpd, work, chromiumPath, scene] = process.argv.slice(2);
const out = join(work, 'live');
let failures = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures++;
}

function startLive() {
  return new Promise((resolveP, reject) => {
    const p = spawn(xpd, ['view', '--live', scene, '-o', out, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    const timer = setTimeout(() => reject(new Error(`xpd view --live did not print a URL: ${text}`)), 30000);
    const take = (d) => {
      text += d;
      const m = /(http:\/\/\S+)/.exec(text);
      if (m) { clearTimeout(timer); resolveP({ proc: p, url: m[1], output: () => text }); }
    };
    p.stdout.on('data', take);
    p.stderr.on('data', (d) => { text += d; });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`xpd view --live exited (${code}): ${text}`)); });
  });
}

// Client coordinates of the midpoints of node pairs given by rest positions, in the frame shown.
function screenOf(page, pairs) {
  return page.evaluate((pairs) => {
    const { THREE, camera, renderer } = window.__xpdScene;
    const fd = window.__xpdLive.currentFrame();
    const P = fd.vtu.points, D = fd.vtu.pointData.displacement.data;
    const node = (r) => {
      let best = -1, bd = Infinity;
      for (let i = 0; i < P.length / 3; i++) {
        const d = Math.hypot(P[3 * i] - D[3 * i] - r[0], P[3 * i + 1] - D[3 * i + 1] - r[1], P[3 * i + 2] - D[3 * i + 2] - r[2]);
        if (d < bd) { bd = d; best = i; }
      }
      return best;
    };
    const rect = renderer.domElement.getBoundingClientRect();
    return pairs.map(([ra, rb]) => {
      const a = node(ra), b = node(rb);
      const v = new THREE.Vector3((P[3 * a] + P[3 * b]) / 2, (P[3 * a + 1] + P[3 * b + 1]) / 2, (P[3 * a + 2] + P[3 * b + 2]) / 2).project(camera);
      const x = rect.left + ((v.x + 1) / 2) * rect.width, y = rect.top + ((1 - v.y) / 2) * rect.height;
      return { x, y, onCanvas: document.elementFromPoint(x, y) === renderer.domElement };
    });
  }, pairs);
}

// Nodes, boundary faces and the opening of split node pairs (same rest position) in the frame shown.
function frameFigures(page) {
  return page.evaluate(() => {
    const fd = window.__xpdLive.currentFrame();
    const P = fd.vtu.points, D = fd.vtu.pointData.displacement.data, n = P.length / 3;
    const key = (i) => [0, 1, 2].map((k) => Math.round((P[3 * i + k] - D[3 * i + k]) * 1e4)).join(',');
    const first = new Map();
    let pairs = 0, minGap = Infinity, maxGap = 0;
    for (let i = 0; i < n; i++) {
      const k = key(i);
      if (!first.has(k)) { first.set(k, i); continue; }
      const j = first.get(k);
      const gap = Math.hypot(P[3 * i] - P[3 * j], P[3 * i + 1] - P[3 * j + 1], P[3 * i + 2] - P[3 * j + 2]);
      pairs++;
      minGap = Math.min(minGap, gap);
      maxGap = Math.max(maxGap, gap);
    }
    const g = window.__xpdScene.body.geometry;
    return { nodes: n, faces: g.index.count / 3, pairs, minGap, maxGap, label: document.getElementById('frame-label').textContent };
  });
}

// A raw POST to /api/event (headers as given), for what a browser page would not send.
function rawPost(url, headers, body) {
  const u = new URL(url);
  return new Promise((res, rej) => {
    const s = net.connect(Number(u.port), u.hostname, () => {
      const h = Object.entries({ Host: u.host, 'Content-Length': body.length, ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      s.write(Buffer.concat([Buffer.from(`POST /api/event HTTP/1.1\r\n${h}\r\n`), body]));
    });
    let data = '';
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('end', () => res({ status: Number(data.split(' ')[1]), body: data.split('\r\n\r\n')[1] || '' }));
    s.on('error', rej);
  });
}

async function main() {
  const live = await startLive();
  console.log(`server: ${live.url}`);
  try {
    await session(live);
  } finally {
    if (live.proc.exitCode === null) live.proc.kill('SIGKILL');
  }
}

async function session(live) {
  // What a page of another origin, a form or a broken client would send: refused, no crash.
  const json = { 'Content-Type': 'application/json' };
  const plain = await rawPost(live.url, { 'Content-Type': 'text/plain' }, Buffer.from('{"tool": "cut"}'));
  check(plain.status === 415, `POST text/plain -> ${plain.status}`);
  const foreign = await rawPost(live.url, { ...json, Origin: 'http://evil.example' }, Buffer.from('{"tool": "cut"}'));
  check(foreign.status === 403, `POST from another origin -> ${foreign.status}`);
  const bad = await rawPost(live.url, json, Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
  check(bad.status === 400 && /not valid JSON/.test(bad.body), `POST of invalid UTF-8 -> ${bad.status} ${bad.body.trim().slice(0, 60)}`);
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(live.url);
    await page.waitForFunction(() => window.__xpdReady || window.__xpdError, null, { timeout: 60000 });
    check(!(await page.evaluate(() => window.__xpdError)), 'the live page loads');
    // The scene's 4 frames, followed as they come.
    await page.waitForFunction(() => /waiting, frame 4/.test(document.getElementById('live-status').textContent) &&
      window.__xpdLive.shownFrame() === 4, null, { timeout: 60000 });
    const before = await frameFigures(page);
    check(before.pairs === 0, `frame 4 before the incision: ${before.nodes} nodes, ${before.faces} boundary faces, no split nodes`);

    // A click off the body picks nothing.
    await page.click('input[name="live-tool"][value="incision"]');
    await page.fill('#live-depth', '0.25');
    // A point of the canvas itself near one of its corners (panels and the controls bar cover
    // some corners, depending on the fonts' sizes).
    const corner = await page.evaluate(() => {
      const canvas = window.__xpdScene.renderer.domElement;
      const r = canvas.getBoundingClientRect();
      for (const [x, y] of [[r.right - 8, r.top + 8], [r.left + 8, r.top + 8], [r.right - 8, r.bottom - 8],
                            [r.left + 8, r.bottom - 8], [r.right - 8, r.top + r.height / 2]])
        if (document.elementFromPoint(x, y) === canvas) return { x, y };
      return null;
    });
    check(corner !== null, 'a corner of the canvas is not covered by a panel');
    if (corner) await page.mouse.click(corner.x, corner.y);
    check(/missed the body/.test(await page.textContent('#live-reply')), `a click off the body: "${await page.textContent('#live-reply')}"`);

    // The incision: two clicks on the top face (y = 0.4) across the slab at x = 1, then Cut.
    const pts = await screenOf(page, [[[1, 0.4, 0.2], [1, 0.4, 0.3]], [[1, 0.4, 0.7], [1, 0.4, 0.8]]]);
    check(pts.every((p) => p.onCanvas), `the incision's points are on the canvas (${pts.map((p) => `${p.x.toFixed(0)},${p.y.toFixed(0)}`).join(' ')})`);
    for (const p of pts) await page.mouse.click(p.x, p.y);
    check((await page.textContent('#live-picks')) === '2 points picked', 'two points picked');
    check(!(await page.isDisabled('#live-cut')), 'Cut is enabled with two points');
    await page.click('#live-cut');
    await page.waitForFunction(() => /applied at frame|refused|did not answer/.test(document.getElementById('live-reply').textContent), null, { timeout: 60000 });
    const reply = await page.textContent('#live-reply');
    check(/^cut applied at frame 5: \d+ faces cut/.test(reply), `the cut: "${reply}"`);
    await page.waitForFunction(() => window.__xpdLive.shownFrame() === 5 &&
      window.__xpdLive.currentFrame().vtu.points.length / 3 > 1155, null, { timeout: 30000 });
    const after = await frameFigures(page);
    check(after.nodes > before.nodes && after.faces > before.faces,
      `the topology changed: ${before.nodes} -> ${after.nodes} nodes, ${before.faces} -> ${after.faces} boundary faces`);
    check(after.pairs === after.nodes - before.nodes && after.minGap > 1e-3,
      `the wound opened: ${after.pairs} split node pairs, opening ${after.minGap.toExponential(2)} .. ${after.maxGap.toExponential(2)} (> 1e-3)`);
    const rec = JSON.parse(readFileSync(join(out, 'events.json'), 'utf8'));
    const cut = rec.events[0] || {};
    const dev = cut.path ? Math.max(...cut.path.map((p, i) => Math.hypot(p[0] - 1, p[1] - 0.4, p[2] - [0.25, 0.75][i]))) : Infinity;
    check(cut.tool === 'cut' && cut.frame === 5 && dev < 0.02 && cut.sweep.every((s) => Math.abs(s[1] + 0.25) < 1e-3 && Math.abs(s[0]) < 1e-3),
      `events.json records the incision in rest space (path ${JSON.stringify(cut.path)}, ${dev.toExponential(1)} from the intended points)`);

    // The highest point of the frame shown (the top face is y = 0.4 at rest; the hook pulls up).
    const topOf = () => page.evaluate(() => {
      const p = window.__xpdLive.currentFrame().vtu.points;
      let top = -Infinity;
      for (let i = 1; i < p.length; i += 3) top = Math.max(top, p[i]);
      return top;
    });
    const unhooked = await topOf();
    // A hook on the flap's side, pulled up over 2 frames.
    await page.click('input[name="live-tool"][value="hook"]');
    await page.fill('#live-pull', '0.1');
    await page.fill('#live-frames', '2');
    const [hp] = await screenOf(page, [[[0.6, 0.4, 0.5], [0.7, 0.4, 0.5]]]);
    await page.mouse.click(hp.x, hp.y);
    await page.waitForFunction(() => /^hook (applied|refused)/.test(document.getElementById('live-reply').textContent), null, { timeout: 60000 });
    check(/^hook applied at frame 6/.test(await page.textContent('#live-reply')), `the hook: "${await page.textContent('#live-reply')}"`);
    // The label changes as soon as a frame is asked for; the mesh when its file has loaded.
    await page.waitForFunction(() => window.__xpdLive.shownFrame() === 7, null, { timeout: 30000 });
    // The hook's Release button: the flap lets go at frame 8 and returns to the quasistatic
    // equilibrium it had before the hook (frame 5's, up to the solver's tolerance).
    const held = await topOf();
    const buttons = await page.$$eval('#live-hooks button', (bs) => bs.map((b) => b.textContent));
    check(buttons.length === 1 && /^Release hook #\d+$/.test(buttons[0]), `one Release button for the hook (${JSON.stringify(buttons)})`);
    await page.click('#live-hooks button');
    await page.waitForFunction(() => /^release (applied|refused)/.test(document.getElementById('live-reply').textContent), null, { timeout: 60000 });
    check(/^release applied at frame 8/.test(await page.textContent('#live-reply')), `the release: "${await page.textContent('#live-reply')}"`);
    await page.waitForFunction(() => window.__xpdLive.shownFrame() === 8, null, { timeout: 30000 });
    const released = await topOf();
    check(held > unhooked + 0.02 && Math.abs(released - unhooked) < 0.01 * (held - unhooked),
      `the released flap is back where it was before the hook: highest point ${unhooked.toFixed(5)} (frame 5) -> ${held.toFixed(5)} (hooked) -> ${released.toFixed(5)} (released)`);
    check((await page.$$('#live-hooks button')).length === 0, 'the released hook has no button any more');
    await page.screenshot({ path: join(work, 'live_after.png') });  // for a person looking into a failure
    check(errors.length === 0, `no page errors (${errors.join('; ')})`);
  } finally {
    await browser.close();
  }

  // Ctrl-C: the session writes its metadata and says how to replay; the replay gives the same frames.
  const exited = new Promise((r) => live.proc.on('exit', (code) => r(code)));
  live.proc.kill('SIGINT');
  const code = await exited;
  check(code === 0 && /replay with: xpd run/.test(live.output()), `xpd view --live stops on SIGINT (exit ${code})`);
  const replay = spawnSync(xpd, ['run', scene, '--events', join(out, 'events.json'), '-o', join(work, 'replay'), '-q'], { encoding: 'utf8' });
  check(replay.status === 0, `xpd run --events replays the session (${replay.stderr.trim().split('\n').pop() || 'ok'})`);
  const load = (f) => { const buf = readFileSync(f); return parseVtu(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)); };
  const a = load(join(out, 'frames', '0008.vtu')), b = load(join(work, 'replay', 'frames', '0008.vtu'));
  let diff = a.points.length === b.points.length ? 0 : Infinity;
  for (let i = 0; i < a.points.length && diff < Infinity; i++) diff = Math.max(diff, Math.abs(a.points[i] - b.points[i]));
  check(diff === 0, `the replay's frame 8 (after the release) equals the session's (max |dx| ${diff})`);
}

main().then(() => {
  console.log(failures === 0 ? 'viewer_live_e2e: all checks passed' : `viewer_live_e2e: ${failures} check(s) failed`);
  process.exit(failures === 0 ? 0 : 1);
}).catch((e) => {
  console.error(e);
  process.exit(1);
});
