// Parser for VTK XML UnstructuredGrid (.vtu) files as written by `xpd run` and by ParaView-style
// tools: appended raw data (the '_' marker followed, per DataArray, by a UInt32/UInt64 byte count
// and the raw bytes), inline base64 ("binary") or ASCII DataArrays. Compressed data is refused.
// The XML header is scanned with a small tag tokenizer rather than DOMParser because the appended
// block is raw binary and the document is not well-formed text.

const TYPE_INFO = {
  Int8: [Int8Array, 1], UInt8: [Uint8Array, 1], Int16: [Int16Array, 2], UInt16: [Uint16Array, 2],
  Int32: [Int32Array, 4], UInt32: [Uint32Array, 4], Int64: [BigInt64Array, 8], UInt64: [BigUint64Array, 8],
  Float32: [Float32Array, 4], Float64: [Float64Array, 8],
};

function attrs(text) {
  const out = {};
  const re = /([A-Za-z_:][\w:.-]*)\s*=\s*("([^"]*)"|'([^']*)')/g;
  let m;
  while ((m = re.exec(text)) !== null) out[m[1]] = m[3] !== undefined ? m[3] : m[4];
  return out;
}

function latin1(bytes) {
  // TextDecoder('latin1') maps byte i to code point i (windows-1252 in practice, fine for XML markup).
  return new TextDecoder('latin1').decode(bytes);
}

function indexOfBytes(bytes, pattern, from = 0) {
  const p0 = pattern.charCodeAt(0);
  outer: for (let i = bytes.indexOf(p0, from); i !== -1; i = bytes.indexOf(p0, i + 1)) {
    for (let k = 1; k < pattern.length; k++) if (bytes[i + k] !== pattern.charCodeAt(k)) continue outer;
    return i;
  }
  return -1;
}

/** Converts raw little/big-endian bytes of VTK type `type` to a JS number array (typed). */
function decodeRaw(bytes, offset, nbytes, type, littleEndian) {
  const info = TYPE_INFO[type];
  if (!info) throw new Error(`unsupported DataArray type "${type}"`);
  const [Ctor, size] = info;
  if (nbytes % size !== 0) throw new Error(`DataArray of type ${type} has ${nbytes} bytes, not a multiple of ${size}`);
  const n = nbytes / size;
  let arr;
  if (littleEndian && (bytes.byteOffset + offset) % size === 0) {
    arr = new Ctor(bytes.buffer, bytes.byteOffset + offset, n);
  } else {
    const copy = bytes.slice(offset, offset + nbytes);
    if (!littleEndian && size > 1) {
      for (let i = 0; i < nbytes; i += size) copy.subarray(i, i + size).reverse();
    }
    arr = new Ctor(copy.buffer, 0, n);
  }
  if (size === 8 && (type === 'Int64' || type === 'UInt64')) {
    // Indices fit in 32 bits for any mesh a browser can show; read the low words directly.
    const lo = new Int32Array(arr.buffer, arr.byteOffset, n * 2);
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = lo[2 * i];
    return out;
  }
  return arr;
}

function decodeBase64(text) {
  const bin = atob(text.replace(/\s+/g, ''));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function parseAscii(text, type) {
  const parts = text.trim().split(/\s+/).filter((s) => s.length > 0);
  const isFloat = type.startsWith('Float');
  const out = isFloat ? new Float64Array(parts.length) : new Int32Array(parts.length);
  for (let i = 0; i < parts.length; i++) out[i] = isFloat ? parseFloat(parts[i]) : parseInt(parts[i], 10);
  return out;
}

function toFloat32(arr) {
  return arr instanceof Float32Array ? arr : Float32Array.from(arr);
}

function toInt32(arr) {
  return arr instanceof Int32Array ? arr : Int32Array.from(arr, Number);
}

/**
 * Parses a .vtu file. Returns
 * { points: Float32Array(3n), nPoints, connectivity: Int32Array, offsets: Int32Array,
 *   types: Uint8Array, pointData: {name: {data: Float32Array, components}}, cellData: {...} }.
 */
export function parseVtu(buffer) {
  // A plain Uint8Array view (Node's Buffer.slice does not copy; Uint8Array.prototype.slice does).
  const bytes = ArrayBuffer.isView(buffer) ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength) : new Uint8Array(buffer);
  const appendedTag = indexOfBytes(bytes, '<AppendedData');
  const headerEnd = appendedTag >= 0 ? appendedTag : bytes.length;
  const header = latin1(bytes.subarray(0, headerEnd));

  const vtkTag = /<VTKFile\b([^>]*)>/.exec(header);
  if (!vtkTag) throw new Error('not a VTK XML file (no <VTKFile> element)');
  const vtkAttrs = attrs(vtkTag[1]);
  if (vtkAttrs.type && vtkAttrs.type !== 'UnstructuredGrid') throw new Error(`VTK file type "${vtkAttrs.type}" is not UnstructuredGrid`);
  if (vtkAttrs.compressor) throw new Error(`compressed VTU (${vtkAttrs.compressor}) is not supported by the viewer`);
  const littleEndian = (vtkAttrs.byte_order || 'LittleEndian') !== 'BigEndian';
  const headerType = vtkAttrs.header_type || 'UInt32';
  const headerSize = headerType === 'UInt64' ? 8 : 4;

  let dataStart = -1;
  if (appendedTag >= 0) {
    const tagClose = bytes.indexOf(0x3e /* > */, appendedTag);
    const tagText = latin1(bytes.subarray(appendedTag, tagClose + 1));
    const enc = attrs(tagText).encoding || 'raw';
    if (enc !== 'raw') throw new Error(`AppendedData encoding "${enc}" is not supported (only raw)`);
    dataStart = bytes.indexOf(0x5f /* _ */, tagClose) + 1;
    if (dataStart <= 0) throw new Error('AppendedData block has no "_" marker');
  }

  const readHeaderInt = (pos) => {
    const dv = new DataView(bytes.buffer, bytes.byteOffset + pos, headerSize);
    return headerSize === 8 ? Number(dv.getBigUint64(0, littleEndian)) : dv.getUint32(0, littleEndian);
  };

  const result = { points: null, nPoints: 0, nCells: 0, connectivity: null, offsets: null, types: null, pointData: {}, cellData: {} };
  const tagRe = /<(\/?)(Piece|Points|Cells|PointData|CellData|DataArray)\b([^>]*?)(\/?)>/g;
  let section = null;
  let m;
  while ((m = tagRe.exec(header)) !== null) {
    const [, closing, name, attrText, selfClosing] = m;
    if (name === 'Piece' && !closing) {
      const a = attrs(attrText);
      result.nPoints = parseInt(a.NumberOfPoints || '0', 10);
      result.nCells = parseInt(a.NumberOfCells || '0', 10);
      continue;
    }
    if (name !== 'DataArray') {
      section = closing || selfClosing ? null : name;
      continue;
    }
    if (closing) continue;
    const a = attrs(attrText);
    const type = a.type || 'Float32';
    const format = a.format || 'ascii';
    const comps = parseInt(a.NumberOfComponents || '1', 10);
    let data;
    if (format === 'appended') {
      if (dataStart < 0) throw new Error(`DataArray "${a.Name || ''}" is appended but the file has no AppendedData`);
      const pos = dataStart + parseInt(a.offset || '0', 10);
      if (pos + headerSize > bytes.length) throw new Error(`DataArray "${a.Name || ''}" offset is past the end of the file (truncated?)`);
      const nbytes = readHeaderInt(pos);
      if (pos + headerSize + nbytes > bytes.length) throw new Error(`DataArray "${a.Name || ''}" runs past the end of the file (truncated?)`);
      data = decodeRaw(bytes, pos + headerSize, nbytes, type, littleEndian);
    } else {
      const end = header.indexOf('</DataArray>', tagRe.lastIndex);
      const body = selfClosing ? '' : header.slice(tagRe.lastIndex, end < 0 ? header.length : end);
      if (format === 'ascii') {
        data = parseAscii(body, type);
      } else if (format === 'binary') {
        const raw = decodeBase64(body);
        const dv = new DataView(raw.buffer);
        const len = headerSize === 8 ? Number(dv.getBigUint64(0, littleEndian)) : dv.getUint32(0, littleEndian);
        data = decodeRaw(raw, headerSize, len, type, littleEndian);
      } else {
        throw new Error(`DataArray format "${format}" is not supported`);
      }
    }
    const arrName = a.Name || '';
    if (section === 'Points') {
      result.points = toFloat32(data);
    } else if (section === 'Cells') {
      if (arrName === 'connectivity') result.connectivity = toInt32(data);
      else if (arrName === 'offsets') result.offsets = toInt32(data);
      else if (arrName === 'types') result.types = data instanceof Uint8Array ? data : Uint8Array.from(data, Number);
    } else if (section === 'PointData' || section === 'CellData') {
      const target = section === 'PointData' ? result.pointData : result.cellData;
      target[arrName || `array${Object.keys(target).length}`] = { data: toFloat32(data), components: comps };
    }
  }
  if (!result.points) throw new Error('VTU file has no Points');
  if (!result.nPoints) result.nPoints = result.points.length / 3;
  if (!result.connectivity || !result.offsets || !result.types) {
    result.connectivity = result.connectivity || new Int32Array(0);
    result.offsets = result.offsets || new Int32Array(0);
    result.types = result.types || new Uint8Array(0);
  }
  return result;
}
