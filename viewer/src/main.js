// xpd viewer: plays the frames of an `xpd run` output folder (served under data/ by `xpd view`).
// URL parameters: frame=N (start frame), render=1 (3D view only, for `xpd render`; w=W&h=H its size),
// frames=a:b (contact sheet of frames a..b, with render=1), up=y|z, data=PATH (run folder URL).
// window.__xpdReady becomes true once the requested frame(s) are drawn; window.__xpdError holds
// the message of a failure. window.__xpdStats has the measured render and playback rates.
import * as THREE from 'three';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';
import { parseVtu } from './vtu.js';
import { boundaryFaces, sameTopology, parseObj, parsePly } from './mesh.js';
import { parseViewDirection } from './view.js';
import { Plots } from './plots.js';
import { headlightMaterial, setOpacity, updateUp } from './shading.js';
import { parseSceneOverlay } from './overlay.js';
import { OverlayView } from './overlay3d.js';
import { LiveMode } from './live.js';

const params = new URLSearchParams(location.search);
const DATA = (params.get('data') || 'data/').replace(/\/?$/, '/');
const RENDER_MODE = params.get('render') === '1';
const SHEET = params.get('frames');
const UP = params.get('up') === 'z' ? 'z' : 'y';
const OVERLAY = params.get('overlay') !== '0';  // overlay=0: no attachments/obstacles (xpd render --no-overlay)
const VIEW = parseViewDirection(params.get('view'));  // view=x,y,z: camera direction (xpd render --view)
const SURFACE_ONLY = params.get('tets') === '0';  // tets=0: only the embedded surface where there is one (--surface-only)
const BACKGROUND = 0x1d2025;
const CACHE_BYTES = 512 * 1024 * 1024;

window.__xpdReady = false;
window.__xpdError = null;
window.__xpdStats = { renderFps: 0, playbackFps: 0, framesShown: 0, loadMs: 0, applyMs: 0, drawMs: 0, gl: '' };

function reportReady(error) {
  if (error) window.__xpdError = String(error);
  else window.__xpdReady = true;
  // Tells `xpd render` (which cannot read JS state from a --screenshot run) the outcome.
  const q = error ? `error=${encodeURIComponent(String(error)).slice(0, 1500)}` : 'ok=1';
  fetch(`api/ready?${q}`, { method: 'GET', cache: 'no-store' }).catch(() => {});
}

function showError(msg) {
  console.error('xpd viewer:', msg);
  const el = document.getElementById('error');
  if (el) { el.textContent = msg; el.style.display = 'block'; }
}

// ---------------------------------------------------------------------------------------------
// Run folder index and frame cache
async function fetchJson(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) return null;
  return r.json();
}

async function loadIndex() {
  const idx = await fetchJson(`${DATA}index.json`).catch(() => null);
  let stats = await fetchJson(`${DATA}stats.json`).catch(() => null);
  let frames;
  if (idx && Array.isArray(idx.frames)) {
    frames = idx.frames;
  } else if (stats && Array.isArray(stats.frames)) {
    // Static hosting without index.json: frame numbers from stats.json, surfaces guessed.
    frames = stats.frames.map((fr, i) => {
      const n = String(Number.isInteger(fr.frame) ? fr.frame : i).padStart(4, '0');
      return { frame: Number(n), vtu: `frames/${n}.vtu`, surface: null };
    });
  } else {
    throw new Error(`cannot list frames: neither ${DATA}index.json nor ${DATA}stats.json is readable`);
  }
  if (frames.length === 0) throw new Error('the run folder has no frames');
  return { frames, stats: stats || { frames: [] }, meta: idx || {}, overlay: await loadOverlay(idx) };
}

// scene.json (attachments, selections, obstacles): optional, older runs have none. `xpd view`
// says in index.json whether it exists, so a missing file is not even requested (no 404 in the
// console); without index.json (static hosting) it is tried. A malformed file is reported as a
// warning and the frames are shown without the overlay.
async function loadOverlay(idx) {
  if (idx && idx.scene !== true) return null;
  let json;
  try {
    json = await fetchJson(`${DATA}scene.json`);
  } catch (e) {
    console.warn(`xpd viewer: ${DATA}scene.json is not valid JSON (${e.message || e}); no overlay`);
    return null;
  }
  if (!json) return null;
  try {
    const overlay = parseSceneOverlay(json);
    for (const w of overlay.warnings) console.warn(`xpd viewer: scene.json: ${w}`);
    return overlay;
  } catch (e) {
    console.warn(`xpd viewer: ${e.message || e}; no overlay`);
    return null;
  }
}

class FrameCache {
  constructor(frames) {
    this.frames = frames;
    this.entries = new Map(); // index -> {promise, bytes, used}
    this.bytes = 0;
    this.clock = 0;
  }
  get(i) {
    let e = this.entries.get(i);
    if (!e) {
      e = { promise: null, bytes: 0, used: 0, value: null };
      e.promise = this.load(i).then((v) => {
        e.value = v;
        e.bytes = v.bytes;
        this.bytes += v.bytes;
        this.evict(i);
        return v;
      });
      e.promise.catch(() => this.entries.delete(i));
      this.entries.set(i, e);
    }
    e.used = ++this.clock;
    return e.promise;
  }
  ready(i) {
    const e = this.entries.get(i);
    return e && e.value ? e.value : null;
  }
  evict(keep) {
    while (this.bytes > CACHE_BYTES && this.entries.size > 2) {
      let victim = -1, oldest = Infinity;
      for (const [k, e] of this.entries) if (k !== keep && e.value && e.used < oldest) { oldest = e.used; victim = k; }
      if (victim < 0) return;
      this.bytes -= this.entries.get(victim).bytes;
      this.entries.delete(victim);
    }
  }
  async load(i) {
    const t0 = performance.now();
    const f = this.frames[i];
    const r = await fetch(DATA + f.vtu);
    if (!r.ok) throw new Error(`${f.vtu}: HTTP ${r.status}`);
    const vtu = parseVtu(await r.arrayBuffer());
    let surface = null;
    if (f.surface) {
      const rs = await fetch(DATA + f.surface);
      if (!rs.ok) throw new Error(`${f.surface}: HTTP ${rs.status}`);
      surface = f.surface.endsWith('.ply') ? parsePly(await rs.arrayBuffer()) : parseObj(await rs.text());
    }
    window.__xpdStats.loadMs = performance.now() - t0;
    const bytes = vtu.points.byteLength * 2 + vtu.connectivity.byteLength + (surface ? surface.positions.byteLength : 0);
    return { vtu, surface, bytes };
  }
}

// ---------------------------------------------------------------------------------------------
// Three.js scene
const viewEl = document.getElementById('view');
// Software WebGL (SwiftShader, llvmpipe: headless or GPU-less machines) pays dearly for MSAA, so
// interactive playback turns antialiasing off there; screenshots (render=1) keep it. aa=0|1 forces.
function softwareGl() {
  try {
    const c = document.createElement('canvas');
    const gl = c.getContext('webgl2') || c.getContext('webgl');
    if (!gl) return false;
    const dbg = gl.getExtension('WEBGL_debug_renderer_info');
    const name = String(dbg ? gl.getParameter(dbg.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER));
    const lose = gl.getExtension('WEBGL_lose_context');
    if (lose) lose.loseContext();
    return /swiftshader|llvmpipe|software/i.test(name);
  } catch (e) {
    return false;
  }
}
const ANTIALIAS = params.has('aa') ? params.get('aa') !== '0' : RENDER_MODE || !softwareGl();
const renderer = new THREE.WebGLRenderer({ antialias: ANTIALIAS, preserveDrawingBuffer: RENDER_MODE });
renderer.setPixelRatio(RENDER_MODE ? 1 : Math.min(window.devicePixelRatio || 1, 2));
renderer.setClearColor(BACKGROUND, 1);
viewEl.appendChild(renderer.domElement);
{
  const gl = renderer.getContext();
  const dbg = gl.getExtension('WEBGL_debug_renderer_info');
  window.__xpdStats.gl = dbg ? gl.getParameter(dbg.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
  window.__xpdStats.antialias = ANTIALIAS;
}
renderer.domElement.id = 'canvas3d';
const scene = new THREE.Scene();
const camera = new THREE.PerspectiveCamera(35, 1, 0.001, 1000);
if (UP === 'z') camera.up.set(0, 0, 1);
const controls = new OrbitControls(camera, renderer.domElement);
controls.enableDamping = !RENDER_MODE;
const WORLD_UP = UP === 'z' ? new THREE.Vector3(0, 0, 1) : new THREE.Vector3(0, 1, 0);
scene.add(camera);
// Lighting lives in the materials (shading.js); keep their "up" fixed in the world.
scene.onBeforeRender = (r, s, cam) => {
  cam.updateMatrixWorld();
  updateUp(bodyMat, cam, WORLD_UP);
  updateUp(surfMat, cam, WORLD_UP);
  if (overlayView) overlayView.beforeRender(cam, WORLD_UP);
};

// polygonOffset (which keeps the edge overlay visible) is switched on only with the overlay: it is
// not free for software rasterizers.
const bodyMat = headlightMaterial(0x8fb3d9, { polygonOffsetFactor: 1, polygonOffsetUnits: 1 });
const bodyGeom = new THREE.BufferGeometry();
const body = new THREE.Mesh(bodyGeom, bodyMat);
body.frustumCulled = false;
scene.add(body);
const wireMat = new THREE.MeshBasicMaterial({ color: 0x20262e, wireframe: true, transparent: true, opacity: 0.35 });
const wire = new THREE.Mesh(bodyGeom, wireMat);
wire.frustumCulled = false;
wire.visible = false;
scene.add(wire);
const surfGeom = new THREE.BufferGeometry();
const surfMat = headlightMaterial(0xe8b04a);
const surfMesh = new THREE.Mesh(surfGeom, surfMat);
surfMesh.frustumCulled = false;
surfMesh.visible = false;
scene.add(surfMesh);
const pointGeom = new THREE.BufferGeometry();
const pointMat = new THREE.PointsMaterial({ size: 4, sizeAttenuation: false, vertexColors: true });
const points = new THREE.Points(pointGeom, pointMat);
points.frustumCulled = false;
points.visible = false;
scene.add(points);

// Attachments, selections and obstacles of scene.json (set in main() when the run has one).
let overlayView = null;

// For debugging from the console and for tests.
window.__xpdScene = { THREE, scene, renderer, camera, body, wire, surfMesh, points, bodyMat, surfMat, overlay: null };

const ACTIVE_COLOR = new THREE.Color(0xff4d3d);
const INACTIVE_COLOR = new THREE.Color(0x9aa3ad);

// Drawing happens on demand (camera moved, frame changed, resize, toggles) and on every animation
// frame while playing, so an idle viewer leaves the CPU to loading and parsing.
let needsRender = true;
function requestDraw() { needsRender = true; }

let topology = null; // {vtu, index}
let activeName = null;
let showPoints = false;

function applyFrame(fd) {
  const t0 = performance.now();
  needsRender = true;
  try {
    applyFrameImpl(fd);
  } finally {
    window.__xpdStats.applyMs = performance.now() - t0;
  }
}

function applyFrameImpl(fd) {
  const { vtu, surface } = fd;
  if (!topology || !sameTopology(topology.vtu, vtu)) {
    const b = boundaryFaces(vtu);
    // Nodes on the boundary: the only ones visible while the body is opaque.
    const onSurface = new Uint8Array(vtu.points.length / 3);
    for (let k = 0; k < b.index.length; k++) onSurface[b.index[k]] = 1;
    let ns = 0;
    for (let k = 0; k < onSurface.length; k++) ns += onSurface[k];
    const surfaceNodes = new Uint32Array(ns);
    for (let k = 0, w = 0; k < onSurface.length; k++) if (onSurface[k]) surfaceNodes[w++] = k;
    topology = { vtu, index: b.index, nBoundaryFaces: b.nBoundaryFaces, nTets: b.nTets, surfaceNodes };
    bodyGeom.setIndex(new THREE.BufferAttribute(b.index, 1));
  }
  const position = new THREE.BufferAttribute(vtu.points, 3);
  bodyGeom.setAttribute('position', position);
  bodyGeom.computeVertexNormals();
  bodyGeom.computeBoundingBox();
  bodyGeom.computeBoundingSphere();
  if (overlayView) overlayView.setPositions(position, bodyGeom.boundingBox);
  // Nodes, coloured by a per-point "active" field when there is one.
  activeName = ['active', 'is_active', 'active_proxy'].find((n) => vtu.pointData[n] && vtu.pointData[n].components === 1) || null;
  points.visible = showPoints || activeName !== null;
  if (points.visible) {
    pointGeom.setAttribute('position', new THREE.BufferAttribute(vtu.points, 3));
    const n = vtu.points.length / 3;
    pointMat.size = n > 20000 ? 2 : n > 3000 ? 3 : 4;
    const col = new Float32Array(n * 3);
    const act = activeName ? vtu.pointData[activeName].data : null;
    for (let i = 0; i < n; i++) {
      const c = act && act[i] > 0.5 ? ACTIVE_COLOR : INACTIVE_COLOR;
      col[3 * i] = c.r; col[3 * i + 1] = c.g; col[3 * i + 2] = c.b;
    }
    pointGeom.setAttribute('color', new THREE.BufferAttribute(col, 3));
    const seeThrough = surface && surface.index.length > 0;
    pointGeom.setIndex(seeThrough || topology.surfaceNodes.length === 0 ? null : new THREE.BufferAttribute(topology.surfaceNodes, 1));
    pointGeom.computeBoundingSphere();
  }
  if (surface && surface.index.length > 0) {
    surfGeom.setAttribute('position', new THREE.BufferAttribute(surface.positions, 3));
    surfGeom.setIndex(new THREE.BufferAttribute(surface.index, 1));
    surfGeom.computeVertexNormals();
    surfMesh.visible = true;
    setOpacity(bodyMat, 0.35);
    body.visible = !SURFACE_ONLY;
  } else {
    surfMesh.visible = false;
    setOpacity(bodyMat, 1);
    body.visible = true;
  }
}

function boxOf(vtu) {
  const b = new THREE.Box3();
  const p = vtu.points;
  for (let i = 0; i < p.length; i += 3) b.expandByPoint(new THREE.Vector3(p[i], p[i + 1], p[i + 2]));
  return b;
}

/**
 * Frames `box`: looks at it along the default direction (or the current one with keepDirection),
 * at the smallest distance at which all 8 corners of the box project inside the view with a small
 * margin, then recentres on the projected extent (one refinement pass).
 */
function fitCamera(box, aspect, keepDirection = false) {
  if (box.isEmpty()) return;
  let target = box.getCenter(new THREE.Vector3());
  const dir = keepDirection
    ? camera.position.clone().sub(controls.target).normalize()
    : VIEW
      ? new THREE.Vector3(VIEW[0], VIEW[1], VIEW[2]).normalize()
      : (UP === 'z' ? new THREE.Vector3(1.2, -1.6, 0.9) : new THREE.Vector3(1.2, 0.9, 1.6)).normalize();
  const tanV = Math.tan((camera.fov * Math.PI) / 360) * 0.9;
  const tanH = tanV * aspect;
  const right = new THREE.Vector3().crossVectors(dir.clone().negate(), camera.up).normalize();
  if (right.lengthSq() < 1e-12) right.set(1, 0, 0);
  const upv = new THREE.Vector3().crossVectors(right, dir.clone().negate()).normalize();
  const corners = [];
  for (let k = 0; k < 8; k++) {
    corners.push(new THREE.Vector3(k & 1 ? box.max.x : box.min.x, k & 2 ? box.max.y : box.min.y, k & 4 ? box.max.z : box.min.z));
  }
  const diag = Math.max(box.getSize(new THREE.Vector3()).length(), 1e-9);
  let dist = 0;
  for (let pass = 0; pass < 2; pass++) {
    dist = 1e-6 * diag;
    const rel = corners.map((c) => c.clone().sub(target));
    for (const q of rel) {
      const x = q.dot(right), y = q.dot(upv), z = q.dot(dir);
      dist = Math.max(dist, z + Math.abs(x) / tanH, z + Math.abs(y) / tanV);
    }
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const q of rel) {
      const depth = dist - q.dot(dir);
      const sx = q.dot(right) / depth, sy = q.dot(upv) / depth;
      x0 = Math.min(x0, sx); x1 = Math.max(x1, sx); y0 = Math.min(y0, sy); y1 = Math.max(y1, sy);
    }
    target = target.clone().addScaledVector(right, ((x0 + x1) / 2) * dist).addScaledVector(upv, ((y0 + y1) / 2) * dist);
  }
  camera.position.copy(target).addScaledVector(dir, dist);
  camera.near = Math.max(dist - diag, dist * 0.01) * 0.5;
  camera.far = (dist + diag) * 4;
  camera.updateProjectionMatrix();
  controls.target.copy(target);
  controls.update();
  needsRender = true;
}

function resize() {
  const w = viewEl.clientWidth, h = viewEl.clientHeight;
  renderer.setSize(w, h, false);
  renderer.domElement.style.width = `${w}px`;
  renderer.domElement.style.height = `${h}px`;
  camera.aspect = w / Math.max(h, 1);
  camera.updateProjectionMatrix();
  needsRender = true;
}

// ---------------------------------------------------------------------------------------------
// Render modes used by `xpd render`
async function renderSingle(run, cache, frameNo) {
  const i = indexOfFrame(run, frameNo);
  const fd = await cache.get(i);
  applyFrame(fd);
  resize();
  fitCamera(boxOf(fd.vtu), camera.aspect);
  renderer.render(scene, camera);
  setLabel(`frame ${run.frames[i].frame}`);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}

async function renderSheet(run, cache, spec) {
  const [a, b] = spec.split(':').map((s) => parseInt(s, 10));
  if (!Number.isInteger(a) || !Number.isInteger(b) || b < a) throw new Error(`bad frames range "${spec}" (want a:b with a <= b)`);
  const idx = [];
  for (let fno = a; fno <= b; fno++) {
    const i = run.frames.findIndex((f) => f.frame === fno);
    if (i >= 0) idx.push(i);
  }
  if (idx.length === 0) throw new Error(`no frames in ${a}:${b} (the run has frames ${run.frames[0].frame}..${run.frames[run.frames.length - 1].frame})`);
  const fds = [];
  for (const i of idx) fds.push(await cache.get(i));
  resize();
  const W = viewEl.clientWidth, H = viewEl.clientHeight;
  let cols = 1;
  // Choose the column count that gives the largest square-ish tiles.
  let bestSize = 0;
  for (let c = 1; c <= idx.length; c++) {
    const r = Math.ceil(idx.length / c);
    const s = Math.min(W / c, H / r);
    if (s > bestSize) { bestSize = s; cols = c; }
  }
  const rows = Math.ceil(idx.length / cols);
  const tw = Math.floor(W / cols), th = Math.floor(H / rows);
  const box = new THREE.Box3();
  for (const fd of fds) box.union(boxOf(fd.vtu));
  camera.aspect = tw / th;
  fitCamera(box, camera.aspect);
  renderer.setScissorTest(true);
  renderer.clear();
  const labels = document.getElementById('labels');
  labels.innerHTML = '';
  fds.forEach((fd, k) => {
    const cx = k % cols, cy = Math.floor(k / cols);
    applyFrame(fd);
    // WebGL viewport origin is bottom-left.
    renderer.setViewport(cx * tw, H - (cy + 1) * th, tw, th);
    renderer.setScissor(cx * tw, H - (cy + 1) * th, tw, th);
    renderer.render(scene, camera);
    const lab = document.createElement('div');
    lab.className = 'tile-label';
    lab.style.left = `${cx * tw + 6}px`;
    lab.style.top = `${cy * th + 4}px`;
    lab.textContent = `frame ${run.frames[idx[k]].frame}`;
    labels.appendChild(lab);
  });
  renderer.setScissorTest(false);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
}

function indexOfFrame(run, frameNo) {
  if (frameNo === null || frameNo === undefined || Number.isNaN(frameNo)) return 0;
  const i = run.frames.findIndex((f) => f.frame === frameNo);
  if (i < 0) throw new Error(`frame ${frameNo} is not in the run (frames ${run.frames[0].frame}..${run.frames[run.frames.length - 1].frame})`);
  return i;
}

function setLabel(text) {
  const el = document.getElementById('labels');
  if (el) el.innerHTML = `<div class="tile-label" style="left:8px;top:6px">${text}</div>`;
}

// ---------------------------------------------------------------------------------------------
// Interactive player
async function interactive(run, cache) {
  const slider = document.getElementById('slider');
  const playBtn = document.getElementById('play');
  const frameLabel = document.getElementById('frame-label');
  const fpsLabel = document.getElementById('fps');
  const speedSel = document.getElementById('speed');
  const info = document.getElementById('info');
  let n = run.frames.length;  // grows in live mode
  slider.max = String(n - 1);
  let current = -1;
  let wanted = 0;
  let playing = false;
  let fitted = false;
  const onPlotSeek = (i) => { setPlaying(false); seek(i); };
  let plots = new Plots(document.getElementById('plots'), run.stats, onPlotSeek);
  // Interactive runs (solver.interactive): the solver's frames per second and the residual each
  // frame left, beside the frame number.
  let statsByFrame = new Map((run.stats.frames || []).map((fr) => [fr.frame, fr]));
  function frameText(k) {
    let t = `frame ${run.frames[k].frame} / ${run.frames[n - 1].frame}`;
    const st = statsByFrame.get(run.frames[k].frame);
    if (run.stats.interactive && st && typeof st.fps === 'number')
      t += ` · interactive: solver ${st.fps.toFixed(1)} fps, residual left ${st.relative_residual.toExponential(1)}`;
    return t;
  }

  async function seek(i) {
    wanted = Math.max(0, Math.min(n - 1, i));
    slider.value = String(wanted);
    frameLabel.textContent = frameText(wanted);
    plots.setFrame(wanted);
    let fd;
    try {
      fd = await cache.get(wanted);
    } catch (err) {
      showError(`frame ${run.frames[wanted].frame}: ${err.message || err}`);
      setPlaying(false);
      return;
    }
    if (wanted !== i) return; // a later seek superseded this one
    show(i, fd);
  }
  function show(i, fd) {
    applyFrame(fd);
    current = i;
    window.__xpdStats.framesShown++;
    if (!fitted) {
      fitCamera(boxOf(fd.vtu), camera.aspect);
      fitted = true;
      if (live) live.setDefaults(boxOf(fd.vtu));
    }
    const np = fd.vtu.points.length / 3;
    info.textContent = `${np.toLocaleString()} nodes, ${topology.nTets.toLocaleString()} tets, ${topology.nBoundaryFaces.toLocaleString()} boundary faces` +
      (activeName ? ` — nodes coloured by "${activeName}" (red = active)` : '') + (fd.surface ? ' — embedded surface shown' : '') +
      (overlayView && overlayView.overlay.attachments.length ? ` — ${overlayView.overlay.attachments.length} attachment(s) marked` : '');
  }
  function setPlaying(p) {
    playing = p;
    playBtn.textContent = p ? 'Pause' : 'Play';
    lastAdvance = performance.now();
    playCount = 0;
    playT0 = performance.now();
  }
  playBtn.addEventListener('click', () => setPlaying(!playing));
  slider.addEventListener('input', () => { setPlaying(false); seek(parseInt(slider.value, 10)); });
  document.getElementById('fit').addEventListener('click', () => {
    const fd = cache.ready(current);
    if (fd) fitCamera(boxOf(fd.vtu), camera.aspect, true);
    requestDraw();
  });
  document.getElementById('wire').addEventListener('change', (e) => {
    wire.visible = e.target.checked;
    bodyMat.polygonOffset = wire.visible;
    bodyMat.needsUpdate = true;
    requestDraw();
  });
  document.getElementById('nodes').addEventListener('change', (e) => {
    showPoints = e.target.checked;
    const fd = cache.ready(current);
    if (fd) applyFrame(fd);
  });
  window.addEventListener('keydown', (e) => {
    if (e.target && e.target.tagName === 'INPUT' && e.target.type !== 'range') return;
    if (e.key === ' ') { setPlaying(!playing); e.preventDefault(); }
    else if (e.key === 'ArrowRight') { setPlaying(false); seek(current + 1); }
    else if (e.key === 'ArrowLeft') { setPlaying(false); seek(current - 1); }
  });
  window.addEventListener('resize', () => { resize(); plots.resize(); plots.setFrame(wanted); });

  // Playback: advance at the chosen rate, but only to frames that have finished loading (so
  // playback slows down rather than skipping when loading is the bottleneck); prefetch ahead.
  let lastAdvance = performance.now();
  let playCount = 0, playT0 = performance.now();
  let drawCount = 0, rafT0 = performance.now();
  controls.addEventListener('change', requestDraw);
  function tick(now) {
    requestAnimationFrame(tick);
    if (now - rafT0 >= 1000) {
      window.__xpdStats.renderFps = (drawCount * 1000) / (now - rafT0);
      drawCount = 0; rafT0 = now;
      if (playing && now - playT0 > 0) window.__xpdStats.playbackFps = (playCount * 1000) / (now - playT0);
      fpsLabel.textContent = `render ${window.__xpdStats.renderFps.toFixed(0)} fps · playback ${playing ? window.__xpdStats.playbackFps.toFixed(1) : '0'} frames/s`;
      if (playing) { playCount = 0; playT0 = now; }
    }
    if (playing) {
      const rate = parseFloat(speedSel.value); // frames per second wanted
      const next = (current + 1) % n;
      for (let k = 1; k <= 4; k++) {
        cache.get((current + k) % n).catch((err) => {
          showError(`frame ${run.frames[(current + k) % n].frame}: ${err.message || err}`);
          setPlaying(false);
        });
      }
      if (now - lastAdvance >= 1000 / rate) {
        const fd = cache.ready(next);
        if (fd) {
          wanted = next;
          slider.value = String(next);
          frameLabel.textContent = frameText(next);
          plots.setFrame(next);
          show(next, fd);
          playCount++;
          lastAdvance = now;
        }
      }
    }
    const moved = controls.update();
    if (needsRender || moved || playing) {
      const t0 = performance.now();
      renderer.render(scene, camera);
      window.__xpdStats.drawMs = performance.now() - t0;
      needsRender = false;
      drawCount++;
    }
  }
  // Live mode (xpd view --live): new frames are appended as the session writes them, and the view
  // follows the last frame while it was showing the last one.
  let live = null;
  if (run.meta.live) {
    live = new LiveMode({
      panel: document.getElementById('live-panel'), dataUrl: DATA, meta: run.meta, camera, renderer, body, scene,
      currentFrame: () => cache.ready(current), requestDraw,
      // The frame number of the mesh on screen: the label changes at once when a frame is asked
      // for, the mesh only once its file has loaded.
      shownFrame: () => (current >= 0 ? run.frames[current].frame : null),
      onFrames: (fresh) => {
        const follow = wanted >= n - 1;
        run.frames.push(...fresh);
        n = run.frames.length;
        slider.max = String(n - 1);
        if (follow && !playing) seek(n - 1);
        else frameLabel.textContent = frameText(wanted);
        // The plots again, with the new frames' statistics.
        fetchJson(`${DATA}stats.json`).then((stats) => {
          if (!stats || !Array.isArray(stats.frames)) return;
          run.stats = stats;
          statsByFrame = new Map(stats.frames.map((fr) => [fr.frame, fr]));
          plots.destroy();
          plots = new Plots(document.getElementById('plots'), stats, onPlotSeek);
          plots.setFrame(wanted);
        }).catch(() => {});
      },
    });
    window.__xpdLive = live;
  }
  resize();
  plots.resize();
  const start = params.has('frame') ? indexOfFrame(run, parseInt(params.get('frame'), 10)) : live ? n - 1 : 0;
  await seek(start);
  renderer.render(scene, camera);
  requestAnimationFrame(tick);
  if (params.get('play') === '1') setPlaying(true);
  window.__xpdPlay = (p) => setPlaying(p);
}

async function main() {
  if (RENDER_MODE) {
    document.body.classList.add('render-mode');
    // Headless Chromium may lay the page out before its window reaches the screenshot size, so
    // `xpd render` passes the size (w, h) and the view takes exactly that.
    const w = parseInt(params.get('w') || '', 10), h = parseInt(params.get('h') || '', 10);
    if (w > 0 && h > 0) {
      viewEl.style.width = `${w}px`;
      viewEl.style.height = `${h}px`;
      viewEl.style.flex = 'none';
    }
  }
  try {
    const run = await loadIndex();
    document.title = `xpd — ${run.meta.name || run.stats.scene || 'run'}`;
    const cache = new FrameCache(run.frames);
    if (run.overlay && OVERLAY) {
      overlayView = new OverlayView(run.overlay, requestDraw);
      scene.add(overlayView.group);
      window.__xpdScene.overlay = overlayView;
      const panel = document.getElementById('overlay-panel');
      if (panel && !RENDER_MODE) overlayView.buildPanel(panel);
    }
    if (RENDER_MODE) {
      if (SHEET) await renderSheet(run, cache, SHEET);
      else await renderSingle(run, cache, params.has('frame') ? parseInt(params.get('frame'), 10) : null);
    } else {
      await interactive(run, cache);
    }
    reportReady(null);
  } catch (err) {
    showError(err && err.message ? err.message : String(err));
    reportReady(err && err.message ? err.message : String(err));
  }
}

main();
