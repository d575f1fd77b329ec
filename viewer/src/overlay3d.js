// Draws a parsed scene.json overlay (overlay.js) with three.js: attached and selected nodes as
// points that follow the frame's node positions, obstacles as translucent meshes, plus the DOM
// legend / selection panel. Everything lives in one THREE.Group added to the scene.
import * as THREE from 'three';
import { attachmentLabel, selectionLabel } from './overlay.js';
import { headlightMaterial, setOpacity, updateUp } from './shading.js';

const hex = (c) => `#${c.toString(16).padStart(6, '0')}`;

export class OverlayView {
  /** overlay: the result of parseSceneOverlay; onChange: called when something must be redrawn. */
  constructor(overlay, onChange) {
    this.overlay = overlay;
    this.onChange = onChange;
    this.group = new THREE.Group();
    this.group.name = 'scene-overlay';
    this.nNodes = -1;
    this.obstaclesBuilt = false;
    this.obstacleMaterials = [];
    // Points: drawn over the body (no depth test) so that clamped faces on the far side and
    // interior selections stay visible; attachments above selections.
    const pointsOf = (entry, size, order) => {
      const geom = new THREE.BufferGeometry();
      const mat = new THREE.PointsMaterial({ color: entry.color, size, sizeAttenuation: false, depthTest: false, transparent: true });
      const pts = new THREE.Points(geom, mat);
      pts.frustumCulled = false;
      pts.renderOrder = order;
      this.group.add(pts);
      return pts;
    };
    this.attachmentPoints = overlay.attachments.map((a) => pointsOf(a, 7, 3));
    this.selectionPoints = overlay.selections.map((s) => {
      const p = pointsOf(s, 5, 2);
      p.visible = false; // off until ticked in the panel
      return p;
    });
    this.obstacleGroup = new THREE.Group();
    this.group.add(this.obstacleGroup);
  }

  get empty() {
    const o = this.overlay;
    return o.attachments.length === 0 && o.selections.length === 0 && o.obstacles.length === 0;
  }

  /** Points of the frame: a BufferAttribute (itemSize 3) shared with the body. */
  setPositions(position, box) {
    const n = position.count;
    if (n !== this.nNodes) {
      this.nNodes = n;
      let dropped = 0;
      const indexOf = (nodes) => {
        let k = 0;
        for (let i = 0; i < nodes.length; i++) if (nodes[i] < n) k++;
        dropped += nodes.length - k;
        const idx = k === nodes.length ? nodes : nodes.filter((v) => v < n);
        return new THREE.BufferAttribute(idx, 1);
      };
      this.overlay.attachments.forEach((a, i) => this.attachmentPoints[i].geometry.setIndex(indexOf(a.nodes)));
      this.overlay.selections.forEach((s, i) => this.selectionPoints[i].geometry.setIndex(indexOf(s.nodes)));
      if (dropped) console.warn(`xpd viewer: scene.json lists ${dropped} node indices beyond the ${n} nodes of the frames; not drawn`);
    }
    for (const p of [...this.attachmentPoints, ...this.selectionPoints]) p.geometry.setAttribute('position', position);
    if (!this.obstaclesBuilt && box && !box.isEmpty()) this.buildObstacles(box);
  }

  buildObstacles(box) {
    this.obstaclesBuilt = true;
    const size = Math.max(box.getSize(new THREE.Vector3()).length(), 1e-6);
    const centre = box.getCenter(new THREE.Vector3());
    for (const o of this.overlay.obstacles) {
      const mat = headlightMaterial(0x8e8e93);
      setOpacity(mat, 0.45);
      this.obstacleMaterials.push(mat);
      let mesh;
      if (o.type === 'sphere') {
        mesh = new THREE.Mesh(new THREE.SphereGeometry(o.radius, 32, 16), mat);
        mesh.position.fromArray(o.center);
      } else if (o.type === 'box') {
        const s = o.max.map((v, i) => Math.max(v - o.min[i], 1e-9));
        mesh = new THREE.Mesh(new THREE.BoxGeometry(s[0], s[1], s[2]), mat);
        mesh.position.set((o.min[0] + o.max[0]) / 2, (o.min[1] + o.max[1]) / 2, (o.min[2] + o.max[2]) / 2);
      } else {
        // An infinite plane, drawn as a square 2 body diagonals wide around the body's projection.
        const n = new THREE.Vector3().fromArray(o.normal);
        const p = new THREE.Vector3().fromArray(o.point);
        const c = centre.clone().addScaledVector(n, -n.dot(centre.clone().sub(p)));
        mesh = new THREE.Mesh(new THREE.PlaneGeometry(2 * size, 2 * size), mat);
        mesh.quaternion.setFromUnitVectors(new THREE.Vector3(0, 0, 1), n);
        mesh.position.copy(c);
      }
      mesh.frustumCulled = false;
      mesh.renderOrder = 1;
      mesh.userData.obstacle = o.type;
      this.obstacleGroup.add(mesh);
    }
  }

  /** Keeps the obstacles' lighting fixed in the world (see shading.js). */
  beforeRender(camera, worldUp) {
    for (const m of this.obstacleMaterials) updateUp(m, camera, worldUp);
  }

  /** Fills `el` with the attachment legend (toggles, on), selection checkboxes (off) and obstacles. */
  buildPanel(el) {
    el.innerHTML = '';
    if (this.empty) { el.style.display = 'none'; return; }
    el.style.display = '';
    const section = (title, id) => {
      const s = document.createElement('div');
      s.id = id;
      s.className = 'overlay-section';
      const h = document.createElement('div');
      h.className = 'overlay-title';
      h.textContent = title;
      s.appendChild(h);
      el.appendChild(s);
      return s;
    };
    const row = (parent, color, text, checked, onToggle, cls) => {
      const label = document.createElement('label');
      label.className = `overlay-row ${cls}`;
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.checked = checked;
      box.addEventListener('change', () => { onToggle(box.checked); this.onChange(); });
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.style.background = hex(color);
      const t = document.createElement('span');
      t.textContent = text;
      label.append(box, sw, t);
      parent.appendChild(label);
      return label;
    };
    if (this.overlay.attachments.length) {
      const s = section('Attachments', 'attachment-legend');
      this.overlay.attachments.forEach((a, i) => {
        const r = row(s, a.color, attachmentLabel(a), true, (on) => { this.attachmentPoints[i].visible = on; }, 'attachment');
        r.dataset.type = a.type;
        r.dataset.selection = a.selection;
      });
    }
    if (this.overlay.selections.length) {
      const s = section('Selections', 'selection-panel');
      this.overlay.selections.forEach((sel, i) => {
        const r = row(s, sel.color, selectionLabel(sel), false, (on) => { this.selectionPoints[i].visible = on; }, 'selection');
        r.dataset.name = sel.name;
      });
    }
    if (this.overlay.obstacles.length) {
      const s = section('Obstacles', 'obstacle-list');
      const counts = {};
      for (const o of this.overlay.obstacles) counts[o.type] = (counts[o.type] || 0) + 1;
      row(s, 0x8e8e93, Object.entries(counts).map(([t, c]) => `${c} ${t}${c > 1 ? 's' : ''}`).join(', '), true,
        (on) => { this.obstacleGroup.visible = on; }, 'obstacle');
    }
  }
}
