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

/**
 * Parses a PLY surface (ascii, binary_little_endian or binary_big_endian): vertex x, y, z and a
 * face vertex-index list; other properties and elements are skipped. Returns {positions, index}.
 */
export function parsePly(buffer) {
  const bytes = ArrayBuffer.isView(buffer) ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength) : new Uint8Array(buffer);
  const headEnd = (() => {
    const marker = 'end_header';
    for (let i = 0; i + marker.length < bytes.length && i < 65536; i++) {
      let ok = true;
      for (let k = 0; k < marker.length && ok; k++) ok = bytes[i + k] === marker.charCodeAt(k);
      if (ok) {
        let j = i + marker.length;
        while (j < bytes.length && bytes[j] !== 10) j++;
        return j + 1;
      }
    }
    throw new Error('PLY: no end_header');
  })();
  const header = new TextDecoder('latin1').decode(bytes.subarray(0, headEnd)).split(/\r?\n/);
  if (header[0].trim() !== 'ply') throw new Error('not a PLY file');
  let format = 'ascii';
  const elements = [];
  for (const line of header) {
    const t = line.trim().split(/\s+/);
    if (t[0] === 'format') format = t[1];
    else if (t[0] === 'element') elements.push({ name: t[1], count: parseInt(t[2], 10), props: [] });
    else if (t[0] === 'property' && elements.length) {
      const el = elements[elements.length - 1];
      if (t[1] === 'list') el.props.push({ name: t[4], list: true, countType: t[2], type: t[3] });
      else el.props.push({ name: t[2], list: false, type: t[1] });
    }
  }
  const SIZES = { char: 1, uchar: 1, int8: 1, uint8: 1, short: 2, ushort: 2, int16: 2, uint16: 2, int: 4, uint: 4, int32: 4, uint32: 4, float: 4, float32: 4, double: 8, float64: 8 };
  const positions = [];
  const index = [];
  if (format === 'ascii') {
    const tokens = new TextDecoder('latin1').decode(bytes.subarray(headEnd)).split(/\s+/).filter((s) => s.length);
    let p = 0;
    for (const el of elements) {
      for (let i = 0; i < el.count; i++) {
        for (const pr of el.props) {
          if (pr.list) {
            const n = parseInt(tokens[p++], 10);
            const vs = tokens.slice(p, p + n).map((s) => parseInt(s, 10));
            p += n;
            if (el.name === 'face') for (let k = 1; k + 1 < n; k++) index.push(vs[0], vs[k], vs[k + 1]);
          } else {
            const v = parseFloat(tokens[p++]);
            if (el.name === 'vertex' && (pr.name === 'x' || pr.name === 'y' || pr.name === 'z')) positions.push(v);
          }
        }
      }
    }
  } else {
    const le = format === 'binary_little_endian';
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let off = headEnd;
    const read = (type) => {
      const size = SIZES[type];
      if (!size) throw new Error(`PLY: unknown property type ${type}`);
      let v;
      switch (type) {
        case 'char': case 'int8': v = dv.getInt8(off); break;
        case 'uchar': case 'uint8': v = dv.getUint8(off); break;
        case 'short': case 'int16': v = dv.getInt16(off, le); break;
        case 'ushort': case 'uint16': v = dv.getUint16(off, le); break;
        case 'int': case 'int32': v = dv.getInt32(off, le); break;
        case 'uint': case 'uint32': v = dv.getUint32(off, le); break;
        case 'float': case 'float32': v = dv.getFloat32(off, le); break;
        default: v = dv.getFloat64(off, le);
      }
      off += size;
      return v;
    };
    for (const el of elements) {
      for (let i = 0; i < el.count; i++) {
        for (const pr of el.props) {
          if (pr.list) {
            const n = read(pr.countType);
            const vs = [];
            for (let k = 0; k < n; k++) vs.push(read(pr.type));
            if (el.name === 'face') for (let k = 1; k + 1 < n; k++) index.push(vs[0], vs[k], vs[k + 1]);
          } else {
            const v = read(pr.type);
            if (el.name === 'vertex' && (pr.name === 'x' || pr.name === 'y' || pr.name === 'z')) positions.push(v);
          }
        }
      }
    }
  }
  return { positions: new Float32Array(positions), index: new Uint32Array(index) };
}
