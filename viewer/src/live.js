// Live mode of the viewer (`xpd view --live SCENE -o OUT`, cli/live_session.hpp): the page follows
// the session's frames as they are written, and a person draws surgical events on the surface:
//   Incision: click points along the skin, then "Cut": a cut along the clicked polyline swept
//             `depth` into the tissue (against the surface normal at each point, in rest space);
//   Hook:     click a point: a skin hook that pulls it `pull` out along the surface normal over
//             `frames` frames (and holds it); each hook placed gets a "Release hook #k" button;
//   Suture:   click a point on each lip of a wound: a stitch between them.
// Events are posted to api/event in the scene format of docs/scene-format.md §9b, in rest
// coordinates (a clicked point is mapped back to rest space through its triangle: same barycentric
// weights, rest = frame positions − "displacement"). The reply (the frame the event was applied at,
// or why the mesh refused it) is shown in the panel.
import * as THREE from 'three';

/**
 * Maps a hit on the boundary triangle (ia, ib, ic) at `hit` (deformed space) to rest space.
 * points, displacement: flat xyz arrays of the frame (rest = points − displacement).
 * Returns { rest, restNormal, normal, edge, weights } with unit normals oriented like the
 * triangle's winding (outward for the viewer's boundary faces) and `edge` the mean rest edge length.
 */
export function restPick(points, displacement, ia, ib, ic, hit) {
  const at = (arr, i) => [arr[3 * i], arr[3 * i + 1], arr[3 * i + 2]];
  const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const unit = (a) => { const l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; };
  const A = at(points, ia), B = at(points, ib), C = at(points, ic);
  const rest = (i) => (displacement ? sub(at(points, i), at(displacement, i)) : at(points, i));
  const Ar = rest(ia), Br = rest(ib), Cr = rest(ic);
  // Barycentric weights of the hit in the deformed triangle (least squares in its plane).
  const e0 = sub(B, A), e1 = sub(C, A), p = sub(hit, A);
  const d00 = dot(e0, e0), d01 = dot(e0, e1), d11 = dot(e1, e1), d20 = dot(p, e0), d21 = dot(p, e1);
  const den = d00 * d11 - d01 * d01;
  let v = den > 0 ? (d11 * d20 - d01 * d21) / den : 0;
  let w = den > 0 ? (d00 * d21 - d01 * d20) / den : 0;
  // Clamp into the triangle (a hit is inside up to round-off).
  v = Math.min(Math.max(v, 0), 1);
  w = Math.min(Math.max(w, 0), 1 - v);
  const u = 1 - v - w;
  const restPoint = [0, 1, 2].map((k) => u * Ar[k] + v * Br[k] + w * Cr[k]);
  const edge = (Math.hypot(...sub(Br, Ar)) + Math.hypot(...sub(Cr, Br)) + Math.hypot(...sub(Ar, Cr))) / 3;
  return {
    rest: restPoint,
    restNormal: unit(cross(sub(Br, Ar), sub(Cr, Ar))),
    normal: unit(cross(e0, e1)),
    edge,
    weights: [u, v, w],
  };
}

/** A point `inset` inside the surface at a pick (rest space): hooks and sutures need a tet around it. */
export function insetPoint(pick, fraction = 0.1) {
  const d = fraction * pick.edge;
  return pick.rest.map((x, k) => x - d * pick.restNormal[k]);
}

/**
 * The cut event of an incision through the picks (≥ 2), `depth` deep, over `frames` frames; with
 * `split`, through the tets (`"mode": "split"`, element splitting: scenes with an embedded surface)
 * instead of along their faces.
 */
export function incisionEvent(picks, depth, frames = 1, split = false) {
  if (picks.length < 2) throw new Error('an incision needs at least two points on the surface');
  if (!(depth > 0)) throw new Error('the depth must be a positive length');
  const ev = {
    tool: 'cut',
    path: picks.map((p) => p.rest),
    sweep: picks.map((p) => p.restNormal.map((n) => -depth * n)),
  };
  if (split) ev.mode = 'split';
  if (frames > 1) ev.duration = frames;
  return ev;
}

/** The release of the hook placed by surgery event `index` (its springs removed at the next frame). */
export function releaseEvent(index) {
  if (!Number.isInteger(index) || index < 0) throw new Error('a hook release needs the hook event\'s index');
  return { tool: 'release', hook: index };
}

/** The hook event at a pick, pulled `pull` out along the deformed normal over `frames` frames. */
export function hookEvent(pick, pull, frames = 1) {
  const ev = { tool: 'hook', point: insetPoint(pick), target: pick.point.map((x, k) => x + pull * pick.normal[k]) };
  if (frames > 1) ev.duration = frames;
  return ev;
}

/** The suture event between two picks (one on each lip). */
export function sutureEvent(a, b) {
  return { tool: 'suture', a: insetPoint(a), b: insetPoint(b) };
}

export class LiveMode {
  /**
   * opts: { panel (element), dataUrl, meta (index.json), camera, renderer, body (THREE.Mesh of the
   *         boundary), scene, currentFrame () => frame data {vtu} of the mesh on screen,
   *         shownFrame () => that mesh's frame number (null before the first), onFrames (frames) => void,
   *         requestDraw () => void }
   */
  constructor(opts) {
    Object.assign(this, opts);
    this.known = this.meta.frames.length;
    this.tool = 'view';
    this.picks = [];
    this.hooks = [];  // hooks placed in this page and not released: the event index the server gave each
    this.busy = false;
    this.lastReply = null;
    this.raycaster = new THREE.Raycaster();
    this.markers = new THREE.Group();
    this.markers.name = 'live-markers';
    this.scene.add(this.markers);
    this.buildPanel();
    this.listen();
    this.setStatus(this.meta.live);
    this.timer = setInterval(() => this.poll(), 400);
  }

  buildPanel() {
    const p = this.panel;
    p.style.display = '';
    p.innerHTML = `
      <div class="live-title">Live surgery</div>
      <div class="live-tools" role="radiogroup">
        ${['view', 'incision', 'hook', 'suture'].map((t) => `<label><input type="radio" name="live-tool" value="${t}"${t === 'view' ? ' checked' : ''}> ${t}</label>`).join('')}
      </div>
      <label>depth <input id="live-depth" type="number" step="any" min="0"></label>
      <label>pull <input id="live-pull" type="number" step="any" min="0"></label>
      <label>frames <input id="live-frames" type="number" step="1" min="1" max="1000" value="1"></label>
      <label title="cut through the tets (element splitting) instead of along their faces: scenes with an embedded surface"><input id="live-split" type="checkbox"> through tets</label>
      <div class="live-buttons"><button id="live-cut" type="button" disabled>Cut</button> <button id="live-clear" type="button">Clear</button></div>
      <div id="live-picks">no points</div>
      <div id="live-hooks"></div>
      <div id="live-status"></div>
      <div id="live-reply"></div>`;
    this.el = (id) => p.querySelector(`#${id}`);
    p.querySelectorAll('input[name="live-tool"]').forEach((r) => r.addEventListener('change', () => this.setTool(r.value)));
    this.el('live-cut').addEventListener('click', () => this.sendIncision());
    this.el('live-clear').addEventListener('click', () => this.clearPicks());
  }

  /** Default lengths from the body's size, once the first frame is shown. */
  setDefaults(box) {
    const size = box.getSize(new THREE.Vector3());
    const smallest = Math.min(size.x, size.y, size.z), diag = size.length();
    if (!this.el('live-depth').value) this.el('live-depth').value = (0.5 * smallest).toPrecision(3);
    if (!this.el('live-pull').value) this.el('live-pull').value = (0.1 * diag).toPrecision(3);
  }

  setTool(t) {
    this.tool = t;
    this.clearPicks();
    this.panel.querySelectorAll('input[name="live-tool"]').forEach((r) => { r.checked = r.value === t; });
  }

  listen() {
    const canvas = this.renderer.domElement;
    let down = null;
    canvas.addEventListener('pointerdown', (e) => { down = { x: e.clientX, y: e.clientY }; });
    canvas.addEventListener('pointerup', (e) => {
      // A click (not a drag of the orbit camera) with a tool picks a point.
      if (!down || this.tool === 'view') return;
      const moved = Math.hypot(e.clientX - down.x, e.clientY - down.y);
      down = null;
      if (moved > 4) return;
      this.click(e.clientX, e.clientY);
    });
    window.addEventListener('keydown', (e) => { if (e.key === 'Escape') this.clearPicks(); });
  }

  /** The pick under a client position, or null when the ray misses the body. */
  pickAt(clientX, clientY) {
    const rect = this.renderer.domElement.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - rect.left) / rect.width) * 2 - 1, -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const hits = this.raycaster.intersectObject(this.body, false);
    const fd = this.currentFrame();
    if (!hits.length || !hits[0].face || !fd) return null;
    const h = hits[0];
    const disp = fd.vtu.pointData.displacement;
    const pick = restPick(fd.vtu.points, disp && disp.components === 3 ? disp.data : null, h.face.a, h.face.b, h.face.c,
      [h.point.x, h.point.y, h.point.z]);
    pick.point = [h.point.x, h.point.y, h.point.z];
    return pick;
  }

  click(clientX, clientY) {
    const pick = this.pickAt(clientX, clientY);
    if (!pick) { this.setReply('that click missed the body', true); return; }
    if (this.tool === 'incision') {
      this.picks.push(pick);
    } else if (this.tool === 'hook') {
      this.send(hookEvent(pick, this.number('live-pull'), this.frames()));
      return;
    } else if (this.tool === 'suture') {
      this.picks.push(pick);
      if (this.picks.length === 2) {
        const ev = sutureEvent(this.picks[0], this.picks[1]);
        this.clearPicks();
        this.send(ev);
        return;
      }
    }
    this.drawPicks();
  }

  number(id) { return parseFloat(this.el(id).value); }
  frames() { return Math.max(1, Math.round(this.number('live-frames')) || 1); }

  sendIncision() {
    let ev;
    try {
      ev = incisionEvent(this.picks, this.number('live-depth'), this.frames(), this.el('live-split').checked);
    } catch (e) {
      this.setReply(e.message, true);
      return;
    }
    this.clearPicks();
    this.send(ev);
  }

  clearPicks() {
    this.picks = [];
    this.drawPicks();
  }

  drawPicks() {
    while (this.markers.children.length) {
      const c = this.markers.children.pop();
      c.geometry.dispose();
      c.material.dispose();
    }
    const n = this.picks.length;
    this.el('live-picks').textContent = n === 0 ? 'no points' : `${n} point${n > 1 ? 's' : ''} picked`;
    this.el('live-cut').disabled = !(this.tool === 'incision' && n >= 2) || this.busy;
    if (n > 0) {
      const pos = new Float32Array(this.picks.flatMap((p) => p.point));
      const g = new THREE.BufferGeometry();
      g.setAttribute('position', new THREE.BufferAttribute(pos, 3));
      const pts = new THREE.Points(g, new THREE.PointsMaterial({ color: 0xffe066, size: 8, sizeAttenuation: false, depthTest: false }));
      pts.renderOrder = 5;
      this.markers.add(pts);
      if (n > 1) {
        const lg = new THREE.BufferGeometry();
        lg.setAttribute('position', new THREE.BufferAttribute(pos.slice(), 3));
        const line = new THREE.Line(lg, new THREE.LineBasicMaterial({ color: 0xffe066, depthTest: false }));
        line.renderOrder = 5;
        this.markers.add(line);
      }
    }
    this.requestDraw();
  }

  async send(ev) {
    this.busy = true;
    this.setReply(`${ev.tool}: sent, waiting for the solver…`, false);
    try {
      const r = await fetch('api/event', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(ev) });
      const body = await r.json().catch(() => ({}));
      this.lastReply = { status: r.status, body, event: ev };
      if (r.status === 200) {
        if (ev.tool === 'hook') this.hooks.push(body.event);
        if (ev.tool === 'release') this.hooks = this.hooks.filter((k) => k !== ev.hook);
        this.drawHooks();
        this.setReply(`${ev.tool} applied at frame ${body.frame}` + (body.faces_cut ? `: ${body.faces_cut} faces cut` : '') +
          (body.tets_split ? `: ${body.tets_split} tets split` : '') + ` (${body.nodes} nodes, ${body.tets} tets)`, false);
      } else if (r.status === 202) {
        this.setReply(`${ev.tool}: queued`, false);
      } else {
        this.setReply(`${ev.tool} refused: ${body.error || `HTTP ${r.status}`}`, true);
      }
    } catch (e) {
      this.lastReply = { status: 0, body: { error: String(e) }, event: ev };
      this.setReply(`${ev.tool}: the server did not answer (${e.message || e})`, true);
    } finally {
      this.busy = false;
      this.drawPicks();
      this.poll();
    }
  }

  /** One Release button per hook placed in the page: it posts a release of that hook's event. */
  drawHooks() {
    const el = this.el('live-hooks');
    el.innerHTML = this.hooks.map((k) => `<button type="button" class="live-release" data-hook="${k}">Release hook #${k}</button>`).join(' ');
    el.querySelectorAll('button').forEach((b) => b.addEventListener('click', () => {
      if (!this.busy) this.send(releaseEvent(parseInt(b.dataset.hook, 10)));
    }));
  }

  setReply(text, isError) {
    const el = this.el('live-reply');
    el.textContent = text;
    el.className = isError ? 'live-error' : '';
  }

  setStatus(live) {
    if (!live) return;
    const s = live.state === 'failed' ? `stopped: ${live.error}` : `${live.state}, frame ${live.frame}, ${live.events} event${live.events === 1 ? '' : 's'}`;
    this.el('live-status').textContent = `session ${s}`;
    this.el('live-status').className = live.state === 'failed' ? 'live-error' : '';
  }

  async poll() {
    if (this.polling) return;
    this.polling = true;
    try {
      const r = await fetch(`${this.dataUrl}index.json`, { cache: 'no-store' });
      if (!r.ok) return;
      const idx = await r.json();
      this.setStatus(idx.live);
      if (Array.isArray(idx.frames) && idx.frames.length > this.known) {
        const fresh = idx.frames.slice(this.known);
        this.known = idx.frames.length;
        this.onFrames(fresh);
      }
    } catch (e) {
      // The server went away (Ctrl-C): say so once, keep the frames shown.
      this.el('live-status').textContent = 'session: the server does not answer';
    } finally {
      this.polling = false;
    }
  }
}
