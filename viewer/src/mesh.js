// Geometry helpers: the boundary surface of a tet mesh (faces used by exactly one tet), oriented
// outward, and a Wavefront OBJ reader for embedded surfaces.

const VTK_TRIANGLE = 5;
const VTK_TETRA = 10;
// Faces of tet (0,1,2,3); the fourth entry is the vertex opposite the face.
const TET_FACES = [[1, 2, 3, 0], [0, 3, 2, 1], [0, 1, 3, 2], [0, 2, 1, 3]];

/**
 * Boundary triangles of the tets in a VTU cell list, plus any triangle cells, as an index array.
 * Faces are bucketed by their smallest vertex (counting sort) and matched within a bucket, which
 * is linear in the number of tets. Each boundary face is oriented so that the opposite vertex of
 * its tet lies behind it (outward normal) using `points`.
 */
export function boundaryFaces(vtu) {
  const { connectivity: conn, offsets, types, points } = vtu;
  const nCells = types.length;
  const nPoints = points.length / 3;
  let nTets = 0;
  let nTris = 0;
  for (let c = 0; c < nCells; c++) {
    if (types[c] === VTK_TETRA) nTets++;
    else if (types[c] === VTK_TRIANGLE) nTris++;
  }
  const nFaces = nTets * 4;
  // face f: sorted (a<b<c), original order (i,j,k), opposite vertex o
  const fa = new Int32Array(nFaces), fb = new Int32Array(nFaces), fc = new Int32Array(nFaces);
  const fo = new Int32Array(nFaces);
  const orig = new Int32Array(nFaces * 3);
  let f = 0;
  for (let c = 0; c < nCells; c++) {
    if (types[c] !== VTK_TETRA) continue;
    const base = c === 0 ? 0 : offsets[c - 1];
    for (const [i, j, k, o] of TET_FACES) {
      const vi = conn[base + i], vj = conn[base + j], vk = conn[base + k];
      let a = vi, b = vj, cc = vk, t;
      if (a > b) { t = a; a = b; b = t; }
      if (b > cc) { t = b; b = cc; cc = t; }
      if (a > b) { t = a; a = b; b = t; }
      fa[f] = a; fb[f] = b; fc[f] = cc; fo[f] = conn[base + o];
      orig[3 * f] = vi; orig[3 * f + 1] = vj; orig[3 * f + 2] = vk;
      f++;
    }
  }
  // Bucket faces by smallest vertex.
  const start = new Int32Array(nPoints + 1);
  for (let i = 0; i < nFaces; i++) start[fa[i] + 1]++;
  for (let i = 0; i < nPoints; i++) start[i + 1] += start[i];
  const fill = start.slice(0, nPoints);
  const order = new Int32Array(nFaces);
  for (let i = 0; i < nFaces; i++) order[fill[fa[i]]++] = i;
  const shared = new Uint8Array(nFaces);
  for (let v = 0; v < nPoints; v++) {
    const s = start[v], e = start[v + 1];
    for (let x = s; x < e; x++) {
      const fx = order[x];
      if (shared[fx]) continue;
      for (let y = x + 1; y < e; y++) {
        const fy = order[y];
        if (!shared[fy] && fb[fx] === fb[fy] && fc[fx] === fc[fy]) { shared[fx] = 1; shared[fy] = 1; break; }
      }
    }
  }
  let nBoundary = 0;
  for (let i = 0; i < nFaces; i++) if (!shared[i]) nBoundary++;
  const index = new Uint32Array((nBoundary + nTris) * 3);
  let w = 0;
  const P = points;
  for (let i = 0; i < nFaces; i++) {
    if (shared[i]) continue;
    const a = orig[3 * i], b = orig[3 * i + 1], c = orig[3 * i + 2], o = fo[i];
    const ux = P[3 * b] - P[3 * a], uy = P[3 * b + 1] - P[3 * a + 1], uz = P[3 * b + 2] - P[3 * a + 2];
    const vx = P[3 * c] - P[3 * a], vy = P[3 * c + 1] - P[3 * a + 1], vz = P[3 * c + 2] - P[3 * a + 2];
    const nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
    const d = nx * (P[3 * o] - P[3 * a]) + ny * (P[3 * o + 1] - P[3 * a + 1]) + nz * (P[3 * o + 2] - P[3 * a + 2]);
    if (d > 0) { index[w++] = a; index[w++] = c; index[w++] = b; } else { index[w++] = a; index[w++] = b; index[w++] = c; }
  }
  for (let c = 0; c < nCells; c++) {
    if (types[c] !== VTK_TRIANGLE) continue;
    const base = c === 0 ? 0 : offsets[c - 1];
    index[w++] = conn[base]; index[w++] = conn[base + 1]; index[w++] = conn[base + 2];
  }
  return { index, nTets, nBoundaryFaces: nBoundary };
}

/** Same cell list (cheap check used to reuse a boundary computed for another frame). */
export function sameTopology(a, b) {
  if (a.connectivity.length !== b.connectivity.length || a.types.length !== b.types.length) return false;
  const ca = a.connectivity, cb = b.connectivity;
  for (let i = 0; i < ca.length; i++) if (ca[i] !== cb[i]) return false;
  return true;
}

/** Parses a Wavefront OBJ: returns {positions: Float32Array, index: Uint32Array}; polygons are fanned. */
export function parseObj(text) {
  const pos = [];
  const idx = [];
  const lines = text.split('\n');
  for (let li = 0; li < lines.length; li++) {
    const line = lines[li];
    if (line.length < 2) continue;
    const c0 = line.charCodeAt(0), c1 = line.charCodeAt(1);
    if (c0 === 118 /* v */ && (c1 === 32 || c1 === 9)) {
      const p = line.trim().split(/\s+/);
      pos.push(parseFloat(p[1]), parseFloat(p[2]), parseFloat(p[3]));
    } else if (c0 === 102 /* f */ && (c1 === 32 || c1 === 9)) {
      const p = line.trim().split(/\s+/).slice(1);
      const nv = pos.length / 3;
      const vs = p.map((s) => {
        const i = parseInt(s, 10);
        return i < 0 ? nv + i : i - 1;
      });
      for (let k = 1; k + 1 < vs.length; k++) idx.push(vs[0], vs[k], vs[k + 1]);
    }
  }
  return { positions: new Float32Array(pos), index: new Uint32Array(idx) };
}
