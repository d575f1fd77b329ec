// Per-frame statistics plots (uPlot): one small chart per numeric key of stats.json "frames",
// timings_ms stacked by phase, and a cursor line at the frame being shown. Clicking a chart seeks.
import uPlot from 'uplot';

const PHASE_COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7'];
const LINE_COLORS = { energy: '#4e79a7', residual: '#e15759', iterations: '#59a14f', active_proxies: '#f28e2b',
  max_penetration: '#b07aa1', inner_iterations: '#76b7b2', wall_ms: '#9c755f' };
const PREFERRED = ['fps', 'relative_residual', 'energy', 'residual', 'iterations', 'inner_iterations', 'wall_ms',
  'active_proxies', 'max_penetration'];
const LOG_KEYS = new Set(['residual', 'relative_residual']);

function isNum(v) { return typeof v === 'number' && Number.isFinite(v); }

/** Compact tick label: exponent notation for very small or large magnitudes. */
export function fmtNum(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '';
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-2 || a >= 1e5)) return v.toExponential(a < 1e-2 && Number.isInteger(Math.log10(a)) ? 0 : 1);
  return String(Math.round(v * 1000) / 1000);
}
const yAxis = { size: 56, values: (u, splits) => splits.map(fmtNum) };

/** Keys of per-frame numeric values and nested timing objects, in a stable, readable order. */
export function statKeys(frames) {
  const scalar = new Set();
  const nested = new Map();
  for (const fr of frames) {
    for (const [k, v] of Object.entries(fr)) {
      if (k === 'frame') continue;
      if (isNum(v)) scalar.add(k);
      else if (v && typeof v === 'object' && !Array.isArray(v)) {
        if (!nested.has(k)) nested.set(k, new Set());
        for (const [sk, sv] of Object.entries(v)) if (isNum(sv)) nested.get(k).add(sk);
      }
    }
  }
  const ordered = [...PREFERRED.filter((k) => scalar.has(k)), ...[...scalar].filter((k) => !PREFERRED.includes(k)).sort()];
  return { scalar: ordered, nested: [...nested.entries()].filter(([, s]) => s.size > 0).map(([k, s]) => [k, [...s]]) };
}

export class Plots {
  constructor(container, stats, onSeek) {
    this.container = container;
    this.charts = [];
    this.onSeek = onSeek;
    const frames = Array.isArray(stats && stats.frames) ? stats.frames : [];
    this.frames = frames;
    this.x = frames.map((fr, i) => (isNum(fr.frame) ? fr.frame : i));
    container.innerHTML = '';
    if (frames.length === 0) {
      const p = document.createElement('div');
      p.className = 'plot-empty';
      p.textContent = 'no stats.json frames';
      container.appendChild(p);
      return;
    }
    const { scalar, nested } = statKeys(frames);
    const width = Math.max(240, container.clientWidth - 16);
    for (const key of scalar) {
      const y = frames.map((fr) => (isNum(fr[key]) ? fr[key] : null));
      const log = LOG_KEYS.has(key) && y.every((v) => v === null || v > 0);
      this.addChart(key, [this.x, y], {
        series: [{ label: 'frame' }, { label: key, stroke: LINE_COLORS[key] || '#333', width: 1.5, points: { show: frames.length < 60 },
          value: (u, v) => (v == null ? '--' : fmtNum(v)) }],
        scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
      }, width);
    }
    for (const [key, phases] of nested) {
      // Stacked: series i holds the cumulative sum of phases 0..i; drawn top-down so each band is visible.
      const raw = phases.map((ph) => frames.map((fr) => (fr[key] && isNum(fr[key][ph]) ? fr[key][ph] : 0)));
      const cum = [];
      let acc = new Array(frames.length).fill(0);
      for (const r of raw) { acc = acc.map((v, i) => v + r[i]); cum.push(acc); }
      const order = phases.map((_, i) => i).reverse();
      const series = [{ label: 'frame' }];
      const data = [this.x];
      for (const i of order) {
        const col = PHASE_COLORS[i % PHASE_COLORS.length];
        series.push({ label: phases[i], stroke: col, fill: col + 'cc', width: 1, points: { show: false },
          value: (u, v, si, idx) => (idx == null ? '--' : raw[i][idx].toFixed(2)) });
        data.push(cum[i]);
      }
      this.addChart(`${key} (stacked)`, data, { series, scales: { x: { time: false }, y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.05 : 1] } } }, width);
    }
  }

  addChart(title, data, opts, width) {
    const wrap = document.createElement('div');
    wrap.className = 'plot';
    wrap.dataset.key = title;
    this.container.appendChild(wrap);
    const cursor = document.createElement('div');
    cursor.className = 'plot-cursor';
    // After every redraw (first layout, resize) put the frame cursor and legend back.
    const hooks = { draw: [(u) => this.placeCursor(u, cursor)] };
    const u = new uPlot({ title, width, height: 150, legend: { show: true, live: true }, cursor: { drag: { x: false, y: false } },
      axes: [{ size: 30 }, yAxis], hooks, ...opts }, data, wrap);
    u.over.appendChild(cursor);
    u.over.addEventListener('click', (ev) => {
      const rect = u.over.getBoundingClientRect();
      const xv = u.posToVal(ev.clientX - rect.left, 'x');
      let best = 0;
      for (let i = 1; i < this.x.length; i++) if (Math.abs(this.x[i] - xv) < Math.abs(this.x[best] - xv)) best = i;
      if (this.onSeek) this.onSeek(best);
    });
    this.charts.push({ u, cursor });
  }

  /** Moves the cursor of every chart to frame index `i` (the i-th frame of the sequence). */
  setFrame(i) {
    this.frame = i;
    for (const { u, cursor } of this.charts) this.placeCursor(u, cursor);
  }

  placeCursor(u, cursor) {
    const i = this.frame;
    if (i === undefined) return;
    const xv = i < this.x.length ? this.x[i] : i;
    if (i < this.x.length) u.setLegend({ idx: i });
    const px = u.valToPos(xv, 'x');
    cursor.style.left = `${px}px`;
    cursor.style.display = Number.isFinite(px) ? 'block' : 'none';
  }

  /** Removes the charts (before a rebuild with more frames, in live mode). */
  destroy() {
    for (const { u } of this.charts) u.destroy();
    this.charts = [];
    this.container.innerHTML = '';
  }

  resize() {
    const width = Math.max(240, this.container.clientWidth - 16);
    for (const { u } of this.charts) u.setSize({ width, height: 150 });
  }
}
