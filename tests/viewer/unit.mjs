// Unit tests of the viewer's parsers and geometry (Node only, no browser): VTU in the layouts
// `xpd run` and other tools write, boundary extraction and orientation, OBJ and PLY surfaces,
// the scene.json overlay (attachments, selections, obstacles).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseVtu } from '../../viewer/src/vtu.js';
import { boundaryFaces, parseObj, parsePly } from '../../viewer/src/mesh.js';
import { parseSceneOverlay, attachmentLabel, selectionLabel, ATTACHMENT_COLORS, SELECTION_COLORS } from '../../viewer/src/overlay.js';

// plots.js imports uPlot from viewer/node_modules: skip (CTest SKIP_RETURN_CODE 77) without it.
if (!existsSync(new URL('../../viewer/node_modules/uplot', import.meta.url))) {
  console.log('SKIP viewer_unit: viewer/node_modules is missing (run scripts/setup-viewer)');
  process.exit(77);
}
const { statKeys, fmtNum } = await import('../../viewer/src/plots.js');

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures++;
}

// One unit cube split into 6 tets (Kuhn), 8 points.
const P = [0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1];
const T = [];
for (const [a, b] of [[1, 2], [2, 3], [3, 7], [7, 4], [4, 5], [5, 1]]) T.push(0, a, b, 6);
const OFF = [4, 8, 12, 16, 20, 24];

function appendedVtu({ header = 'UInt64', pointType = 'Float64', intType = 'Int64', order = 'LittleEndian' } = {}) {
  const le = order === 'LittleEndian';
  const hsize = header === 'UInt64' ? 8 : 4;
  const arrays = [];
  const put = (values, type) => {
    const size = { Float64: 8, Float32: 4, Int64: 8, Int32: 4, UInt8: 1 }[type];
    const b = new DataView(new ArrayBuffer(hsize + values.length * size));
    if (hsize === 8) b.setBigUint64(0, BigInt(values.length * size), le); else b.setUint32(0, values.length * size, le);
    values.forEach((v, i) => {
      const o = hsize + i * size;
      if (type === 'Float64') b.setFloat64(o, v, le);
      else if (type === 'Float32') b.setFloat32(o, v, le);
      else if (type === 'Int64') b.setBigInt64(o, BigInt(v), le);
      else if (type === 'Int32') b.setInt32(o, v, le);
      else b.setUint8(o, v);
    });
    arrays.push(new Uint8Array(b.buffer));
  };
  put(P, pointType); put(T, intType); put(OFF, intType); put([10, 10, 10, 10, 10, 10], 'UInt8'); put([0, 1, 0, 1, 0, 1, 0, 1], 'Float64');
  const offs = [];
  let acc = 0;
  for (const a of arrays) { offs.push(acc); acc += a.length; }
  const xml = `<?xml version="1.0"?>\n<VTKFile type="UnstructuredGrid" version="1.0" byte_order="${order}" header_type="${header}">
<UnstructuredGrid><Piece NumberOfPoints="8" NumberOfCells="6">
<Points><DataArray type="${pointType}" Name="Points" NumberOfComponents="3" format="appended" offset="${offs[0]}"/></Points>
<Cells><DataArray type="${intType}" Name="connectivity" format="appended" offset="${offs[1]}"/>
<DataArray type="${intType}" Name="offsets" format="appended" offset="${offs[2]}"/>
<DataArray type="UInt8" Name="types" format="appended" offset="${offs[3]}"/></Cells>
<PointData><DataArray type="Float64" Name="active" format="appended" offset="${offs[4]}"/></PointData>
</Piece></UnstructuredGrid>
<AppendedData encoding="raw">
_`;
  const head = new TextEncoder().encode(xml);
  const tail = new TextEncoder().encode('\n</AppendedData>\n</VTKFile>\n');
  const out = new Uint8Array(head.length + acc + tail.length);
  out.set(head, 0);
  let o = head.length;
  for (const a of arrays) { out.set(a, o); o += a.length; }
  out.set(tail, o);
  return out;
}

function checkCube(v, what) {
  check(v.points.length === 24 && v.points[3] === 1 && v.points[23] === 1, `${what}: points`);
  check(v.connectivity.length === 24 && v.connectivity[2] === 2 && v.connectivity[23] === 6, `${what}: connectivity`);
  check(v.offsets[5] === 24 && v.types[0] === 10, `${what}: offsets and types`);
  const b = boundaryFaces(v);
  check(b.nTets === 6 && b.nBoundaryFaces === 12, `${what}: 12 boundary faces of the cube (got ${b.nBoundaryFaces})`);
  // Every boundary face must point away from the cube centre.
  let outward = 0;
  for (let f = 0; f < b.index.length; f += 3) {
    const [a, c1, c2] = [b.index[f], b.index[f + 1], b.index[f + 2]].map((i) => [v.points[3 * i], v.points[3 * i + 1], v.points[3 * i + 2]]);
    const u = c1.map((x, k) => x - a[k]), w = c2.map((x, k) => x - a[k]);
    const n = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]];
    const mid = [0, 1, 2].map((k) => (a[k] + c1[k] + c2[k]) / 3 - 0.5);
    if (n[0] * mid[0] + n[1] * mid[1] + n[2] * mid[2] > 0) outward++;
  }
  check(outward === 12, `${what}: all boundary faces oriented outward (${outward}/12)`);
}

checkCube(parseVtu(appendedVtu()), 'appended UInt64/Float64/Int64 (xpd run layout)');
checkCube(parseVtu(appendedVtu({ header: 'UInt32', pointType: 'Float32', intType: 'Int32' })), 'appended UInt32/Float32/Int32');
checkCube(parseVtu(appendedVtu({ order: 'BigEndian' })), 'appended BigEndian');
const va = parseVtu(appendedVtu());
check(va.pointData.active && va.pointData.active.data[1] === 1 && va.pointData.active.components === 1, 'point data "active" read');

const ascii = new TextEncoder().encode(`<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian">
<UnstructuredGrid><Piece NumberOfPoints="8" NumberOfCells="6">
<Points><DataArray type="Float32" NumberOfComponents="3" format="ascii">${P.join(' ')}</DataArray></Points>
<Cells><DataArray type="Int32" Name="connectivity" format="ascii">${T.join(' ')}</DataArray>
<DataArray type="Int32" Name="offsets" format="ascii">${OFF.join(' ')}</DataArray>
<DataArray type="UInt8" Name="types" format="ascii">10 10 10 10 10 10</DataArray></Cells>
</Piece></UnstructuredGrid></VTKFile>`);
checkCube(parseVtu(ascii), 'ASCII');

const b64 = (type, values, size, setter) => {
  const dv = new DataView(new ArrayBuffer(4 + values.length * size));
  dv.setUint32(0, values.length * size, true);
  values.forEach((v, i) => setter(dv, 4 + i * size, v));
  return Buffer.from(dv.buffer).toString('base64');
};
const inline = new TextEncoder().encode(`<VTKFile type="UnstructuredGrid" version="0.1" byte_order="LittleEndian" header_type="UInt32">
<UnstructuredGrid><Piece NumberOfPoints="8" NumberOfCells="6">
<Points><DataArray type="Float64" NumberOfComponents="3" format="binary">${b64('Float64', P, 8, (d, o, v) => d.setFloat64(o, v, true))}</DataArray></Points>
<Cells><DataArray type="Int32" Name="connectivity" format="binary">${b64('Int32', T, 4, (d, o, v) => d.setInt32(o, v, true))}</DataArray>
<DataArray type="Int32" Name="offsets" format="binary">${b64('Int32', OFF, 4, (d, o, v) => d.setInt32(o, v, true))}</DataArray>
<DataArray type="UInt8" Name="types" format="binary">${b64('UInt8', [10, 10, 10, 10, 10, 10], 1, (d, o, v) => d.setUint8(o, v))}</DataArray></Cells>
</Piece></UnstructuredGrid></VTKFile>`);
checkCube(parseVtu(inline), 'inline base64 binary');

let threw = '';
try { parseVtu(appendedVtu().subarray(0, 900)); } catch (e) { threw = e.message; }
check(/truncated|past the end/.test(threw), `truncated file refused (${threw})`);
threw = '';
try { parseVtu(new TextEncoder().encode('<VTKFile type="UnstructuredGrid" compressor="vtkZLibDataCompressor">')); } catch (e) { threw = e.message; }
check(/compressed/.test(threw), `compressed file refused (${threw})`);

const obj = parseObj('# c\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 4//1\nf -1 -2 -3\n');
check(obj.positions.length === 12 && obj.index.length === 9 && obj.index[3] === 0 && obj.index[6] === 3, 'OBJ: quads fanned, v//vn and negative indices');
const ply = parsePly(new TextEncoder().encode('ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nproperty uchar red\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0 255\n1 0 0 0\n0 1 0 0\n3 0 1 2\n'));
check(ply.positions.length === 9 && ply.positions[3] === 1 && ply.index.length === 3, 'PLY ascii with extra vertex property');

const keys = statKeys([{ frame: 0, energy: 1, timings_ms: { local: 1, solve: 2 } }, { frame: 1, energy: 2, residual: 1e-3, active_proxies: 3, timings_ms: { local: 1, solve: 2, rhs: 1 } }]);
check(keys.scalar.join() === 'energy,residual,active_proxies' && keys.nested[0][0] === 'timings_ms' && keys.nested[0][1].length === 3, `stats keys: ${JSON.stringify(keys)}`);
check(fmtNum(1e-6) === '1e-6' && fmtNum(12.3456) === '12.346' && fmtNum(2e6) === '2.0e+6', `tick format (${fmtNum(1e-6)}, ${fmtNum(12.3456)}, ${fmtNum(2e6)})`);

// --- scene.json overlay
{
  const o = parseSceneOverlay({
    attachments: [{ type: 'fixed', selection: 'clamp', nodes: [0, 4, 8] },
      { type: 'bone', selection: 'arm', nodes: [1, 2], count: 300000, truncated: true }],
    selections: { clamp: [0, 4, 8], big: { nodes: [5, 6], count: 250000, truncated: true } },
    obstacles: [{ type: 'sphere', center: [0, 1, 0], radius: 0.5 }, { type: 'plane', point: [0, 0, 0], normal: [0, 2, 0] },
      { type: 'box', min: [0, 0, 0], max: [1, 1, 1] }],
    future_key: 42,
  });
  check(o.warnings.length === 0, `overlay: well-formed file gives no warnings (${o.warnings.join('; ')})`);
  check(o.attachments.length === 2 && o.attachments[0].type === 'fixed' && o.attachments[0].selection === 'clamp' &&
    o.attachments[0].nodes instanceof Uint32Array && o.attachments[0].nodes.join() === '0,4,8', 'overlay: attachment parsed');
  check(o.attachments[0].color !== o.attachments[1].color && o.attachments.every((a) => ATTACHMENT_COLORS.includes(a.color)),
    'overlay: one colour per attachment');
  check(o.attachments[1].truncated && o.attachments[1].count === 300000 && /300,000 nodes, first 2 shown/.test(attachmentLabel(o.attachments[1])),
    `overlay: truncated attachment (${attachmentLabel(o.attachments[1])})`);
  check(attachmentLabel(o.attachments[0]) === 'fixed · clamp (3 nodes)', `overlay: legend label (${attachmentLabel(o.attachments[0])})`);
  check(o.selections.map((s) => s.name).join() === 'clamp,big' && o.selections[1].truncated && o.selections[1].nodes.length === 2 &&
    selectionLabel(o.selections[0]) === 'clamp (3 nodes)', 'overlay: selections as lists and as {nodes, count, truncated}');
  check(o.selections.every((s) => SELECTION_COLORS.includes(s.color) && !ATTACHMENT_COLORS.includes(s.color)),
    'overlay: selection colours distinct from attachment colours');
  check(o.obstacles.length === 3 && o.obstacles[0].radius === 0.5 && o.obstacles[1].normal[1] === 1 && o.obstacles[2].max[2] === 1,
    'overlay: sphere, plane (normal normalised) and box obstacles');

  const bad = parseSceneOverlay(JSON.stringify({
    attachments: [{ type: 'fixed', nodes: [0, -1, 1.5, 'x', 9, 2] }, { type: 'rigid' }, 7],
    selections: { a: 'nope', b: [3, 99] },
    obstacles: [{ type: 'cone' }, { type: 'sphere', center: [0, 0], radius: 1 }, { type: 'box', min: [1, 0, 0], max: [0, 1, 1] },
      { type: 'plane', point: [0, 0, 0], normal: [0, 0, 0] }],
  }), 10);
  check(bad.attachments.length === 1 && bad.attachments[0].nodes.join() === '0,9,2', `overlay: invalid node indices dropped (${bad.attachments[0] && bad.attachments[0].nodes.join()})`);
  check(bad.selections.length === 1 && bad.selections[0].nodes.join() === '3', 'overlay: bad selection dropped, out-of-range index dropped (nNodes = 10)');
  check(bad.obstacles.length === 0 && bad.warnings.length >= 8, `overlay: malformed obstacles dropped with warnings (${bad.warnings.length})`);
  const empty = parseSceneOverlay({});
  check(empty.attachments.length === 0 && empty.selections.length === 0 && empty.obstacles.length === 0 && empty.warnings.length === 0,
    'overlay: empty object is a valid (empty) overlay');
  let threwOverlay = false;
  try { parseSceneOverlay('[1, 2]'); } catch (e) { threwOverlay = /not a JSON object/.test(e.message); }
  check(threwOverlay, 'overlay: a non-object is refused');

  // The file make_run.py writes (the same layout as `xpd run`).
  const dir = mkdtempSync(join(tmpdir(), 'xpd-unit-'));
  try {
    execFileSync('python3', [fileURLToPath(new URL('./make_run.py', import.meta.url)), dir, '--cells', '2,1,1', '--frames', '1', '--obstacles'], { stdio: 'ignore' });
    const g = parseSceneOverlay(readFileSync(join(dir, 'scene.json'), 'utf8'), 12);
    check(g.warnings.length === 0 && g.attachments.length === 2 && g.attachments[0].nodes.join() === '0,3,6,9' &&
      g.selections.length === 3 && g.obstacles.length === 3, `overlay: make_run.py scene.json (${g.attachments.map((a) => a.nodes.join(' ')).join(' | ')})`);
  } catch (e) {
    check(false, `overlay: make_run.py scene.json (${e.message})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- live mode (live.js): a click on a deformed boundary triangle mapped back to rest space
{
  const { restPick, insetPoint, incisionEvent, hookEvent, sutureEvent, releaseEvent } = await import('../../viewer/src/live.js');
  // Rest triangle in z = 1 (outward normal +z), deformed by a stretch of 2 in x, a shear and a shift.
  const rest = [[0, 0, 1], [1, 0, 1], [0, 1, 1]];
  const F = (p) => [2 * p[0] + 0.5 * p[1] + 0.1, p[1] - 0.2, p[2] + 0.3];
  const def = rest.map(F);
  const points = def.flat(), displacement = def.flatMap((d, i) => d.map((x, k) => x - rest[i][k]));
  const w = [0.2, 0.3, 0.5];
  const hit = [0, 1, 2].map((k) => w[0] * def[0][k] + w[1] * def[1][k] + w[2] * def[2][k]);
  const pick = restPick(points, displacement, 0, 1, 2, hit);
  const want = [0, 1, 2].map((k) => w[0] * rest[0][k] + w[1] * rest[1][k] + w[2] * rest[2][k]);
  const err = Math.max(...pick.rest.map((x, k) => Math.abs(x - want[k])));
  check(err < 1e-12 && Math.abs(pick.restNormal[2] - 1) < 1e-12 && pick.normal[2] > 0.99,
    `live: a hit maps to rest space with the triangle's weights (error ${err.toExponential(1)}, rest normal ${pick.restNormal.join(',')})`);
  const edge = (1 + Math.SQRT2 + 1) / 3;
  check(Math.abs(pick.edge - edge) < 1e-12 && Math.abs(insetPoint(pick)[2] - (1 - 0.1 * edge)) < 1e-12,
    'live: hooks and sutures sit a tenth of an edge inside the surface');
  // A hit a hair outside the triangle (round-off) is clamped onto it.
  const out = restPick(points, displacement, 0, 1, 2, def[1].map((x, k) => x + (k === 0 ? 1e-9 : 0)));
  check(out.weights.every((x) => x >= 0) && Math.abs(out.weights.reduce((a, b) => a + b) - 1) < 1e-12, 'live: weights clamped into the triangle');
  pick.point = hit;
  const ev = incisionEvent([pick, { ...pick, rest: [0.5, 0.5, 1] }], 0.25, 3);
  check(ev.tool === 'cut' && ev.path.length === 2 && ev.sweep[1][2] === -0.25 && ev.duration === 3 && !('frame' in ev),
    `live: incision event ${JSON.stringify(ev)}`);
  check(!('mode' in ev), 'live: an incision follows the faces unless asked to split');
  const sp = incisionEvent([pick, { ...pick, rest: [0.5, 0.5, 1] }], 0.25, 1, true);
  check(sp.mode === 'split' && !('duration' in sp) && sp.path.length === 2, `live: split incision ${JSON.stringify(sp)}`);
  let threw = '';
  try { incisionEvent([pick], 0.1); } catch (e) { threw = e.message; }
  check(/two points/.test(threw), `live: one point is not an incision (${threw})`);
  const hk = hookEvent(pick, 0.5, 1);
  check(hk.tool === 'hook' && Math.abs(hk.target[2] - (hit[2] + 0.5 * pick.normal[2])) < 1e-12 && !('duration' in hk), 'live: a hook pulls along the deformed normal');
  const su = sutureEvent(pick, pick);
  check(su.tool === 'suture' && su.a.length === 3 && su.b.length === 3, 'live: suture event');
  const rl = releaseEvent(3);
  check(rl.tool === 'release' && rl.hook === 3 && Object.keys(rl).length === 2, `live: hook release event ${JSON.stringify(rl)}`);
  threw = '';
  try { releaseEvent(-1); } catch (e) { threw = e.message; }
  check(/index/.test(threw), `live: a release needs a hook index (${threw})`);
}

// xpd render --view: the camera direction "x,y,z".
{
  const { parseViewDirection } = await import('../../viewer/src/view.js');
  const v = parseViewDirection('-0.6, -0.5,1');
  check(v.length === 3 && v[0] === -0.6 && v[1] === -0.5 && v[2] === 1, `view: parsed ${JSON.stringify(v)}`);
  check(parseViewDirection(null) === null && parseViewDirection('') === null, 'view: absent gives the default');
  for (const bad of ['1,2', '0,0,0', '1,x,2', '1,,2', '1,2,3,4', 'Infinity,0,1']) {
    let threw = '';
    try { parseViewDirection(bad); } catch (e) { threw = e.message; }
    check(/not a direction/.test(threw), `view: "${bad}" refused (${threw})`);
  }
}

console.log(failures === 0 ? 'viewer_unit: all checks passed' : `viewer_unit: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
