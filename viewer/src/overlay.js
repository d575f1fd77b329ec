// OUT/scene.json, the overlay `xpd run` writes next to the frames (docs/output-format.md):
//   {"attachments": [{"type": "fixed"|"rigid"|"bone", "selection": NAME, "nodes": [i, ...],
//                     "count"?: N, "truncated"?: true}, ...],
//    "selections": {NAME: [i, ...] | {"nodes": [...], "count": N, "truncated": true}, ...},
//    "obstacles": [{"type": "sphere", "center": [x,y,z], "radius": r}
//                | {"type": "plane", "point": [x,y,z], "normal": [x,y,z]}
//                | {"type": "box", "min": [x,y,z], "max": [x,y,z]}, ...]}
// parseSceneOverlay() validates it without three.js (unit-tested in Node): malformed entries are
// dropped with a warning rather than failing the whole viewer, unknown keys are ignored (so newer
// writers stay readable), and node indices are kept as sorted-or-not Uint32Arrays.

// Attachment colours (warm / saturated, apart from the blue body, the yellow embedded surface and
// the red of "active" nodes) and selection colours (cool / neutral), cycled when there are more.
export const ATTACHMENT_COLORS = [0xff2d95, 0xff9500, 0xc7f000, 0xb86bff, 0xffd60a, 0xa0522d];
export const SELECTION_COLORS = [0x34e0c8, 0x5ac8fa, 0x7dff7a, 0xffffff, 0x9f8cff, 0x00b3ff];

export function attachmentColor(i) { return ATTACHMENT_COLORS[i % ATTACHMENT_COLORS.length]; }
export function selectionColor(i) { return SELECTION_COLORS[i % SELECTION_COLORS.length]; }

const isVec3 = (v) => Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number' && Number.isFinite(x));

// [i, ...] -> Uint32Array of the valid entries (non-negative integers, < nNodes when known).
function nodeList(list, nNodes, what, warnings) {
  if (!Array.isArray(list)) { warnings.push(`${what}: "nodes" is not an array`); return null; }
  const out = new Uint32Array(list.length);
  let w = 0, bad = 0;
  for (const v of list) {
    if (Number.isInteger(v) && v >= 0 && (nNodes === undefined || v < nNodes)) out[w++] = v;
    else bad++;
  }
  if (bad) warnings.push(`${what}: ${bad} node ${bad === 1 ? 'index' : 'indices'} out of range or not integers ignored`);
  return w === out.length ? out : out.slice(0, w);
}

function parseObstacle(o, k, warnings) {
  const what = `obstacles[${k}]`;
  if (!o || typeof o !== 'object') { warnings.push(`${what}: not an object`); return null; }
  if (o.type === 'sphere') {
    if (isVec3(o.center) && typeof o.radius === 'number' && o.radius > 0) return { type: 'sphere', center: o.center, radius: o.radius };
    warnings.push(`${what}: a sphere needs "center" [x,y,z] and "radius" > 0`);
  } else if (o.type === 'plane') {
    const n = o.normal;
    if (isVec3(o.point) && isVec3(n) && Math.hypot(...n) > 0) {
      const l = Math.hypot(...n);
      return { type: 'plane', point: o.point, normal: n.map((x) => x / l) };
    }
    warnings.push(`${what}: a plane needs "point" [x,y,z] and a non-zero "normal" [x,y,z]`);
  } else if (o.type === 'box') {
    if (isVec3(o.min) && isVec3(o.max) && o.min.every((x, i) => x <= o.max[i])) return { type: 'box', min: o.min, max: o.max };
    warnings.push(`${what}: a box needs "min" <= "max" (both [x,y,z])`);
  } else {
    warnings.push(`${what}: unknown obstacle type ${JSON.stringify(o.type)} (sphere, plane or box)`);
  }
  return null;
}

/**
 * Parses scene.json (an object, or its text). nNodes (optional) drops node indices >= nNodes.
 * Returns {attachments: [{type, selection, nodes, count, truncated, color}],
 *          selections: [{name, nodes, count, truncated, color}], obstacles: [...], warnings: [...]}.
 * Throws only when `json` is not a JSON object at all.
 */
export function parseSceneOverlay(json, nNodes) {
  const j = typeof json === 'string' ? JSON.parse(json) : json;
  if (!j || typeof j !== 'object' || Array.isArray(j)) throw new Error('scene.json: not a JSON object');
  const warnings = [];
  const attachments = [];
  if (j.attachments !== undefined && !Array.isArray(j.attachments)) warnings.push('"attachments" is not an array');
  for (const [k, a] of (Array.isArray(j.attachments) ? j.attachments : []).entries()) {
    const what = `attachments[${k}]`;
    if (!a || typeof a !== 'object') { warnings.push(`${what}: not an object`); continue; }
    const nodes = nodeList(a.nodes, nNodes, what, warnings);
    if (!nodes) continue;
    attachments.push({
      type: typeof a.type === 'string' ? a.type : 'attachment',
      selection: typeof a.selection === 'string' ? a.selection : '',
      nodes,
      count: Number.isInteger(a.count) ? a.count : nodes.length,
      truncated: a.truncated === true,
      color: attachmentColor(attachments.length),
    });
  }
  const selections = [];
  const sel = j.selections;
  if (sel !== undefined && (sel === null || typeof sel !== 'object' || Array.isArray(sel))) warnings.push('"selections" is not an object');
  else if (sel) {
    for (const [name, v] of Object.entries(sel)) {
      const what = `selections.${name}`;
      const obj = Array.isArray(v) ? { nodes: v } : v;
      if (!obj || typeof obj !== 'object') { warnings.push(`${what}: not a node list`); continue; }
      const nodes = nodeList(obj.nodes, nNodes, what, warnings);
      if (!nodes) continue;
      selections.push({
        name,
        nodes,
        count: Number.isInteger(obj.count) ? obj.count : nodes.length,
        truncated: obj.truncated === true,
        color: selectionColor(selections.length),
      });
    }
  }
  const obstacles = [];
  if (j.obstacles !== undefined && !Array.isArray(j.obstacles)) warnings.push('"obstacles" is not an array');
  for (const [k, o] of (Array.isArray(j.obstacles) ? j.obstacles : []).entries()) {
    const p = parseObstacle(o, k, warnings);
    if (p) obstacles.push(p);
  }
  return { attachments, selections, obstacles, warnings };
}

/** Legend text of one attachment, e.g. "fixed · clamp (105 nodes)". */
export function attachmentLabel(a) {
  const n = a.count.toLocaleString('en-US');
  return `${a.type}${a.selection ? ' · ' + a.selection : ''} (${n} node${a.count === 1 ? '' : 's'}${a.truncated ? ', first ' + a.nodes.length.toLocaleString('en-US') + ' shown' : ''})`;
}

/** Panel text of one selection, e.g. "tip (12 nodes)". */
export function selectionLabel(s) {
  const n = s.count.toLocaleString('en-US');
  return `${s.name} (${n} node${s.count === 1 ? '' : 's'}${s.truncated ? ', first ' + s.nodes.length.toLocaleString('en-US') + ' shown' : ''})`;
}
