// Camera direction of a screenshot (xpd render --view): "x,y,z", the direction from the framed
// body's centre to the camera, any length.

/**
 * Parses "x,y,z" into [x, y, z] (finite, not all zero), or returns null for an absent value.
 * Throws Error naming the value otherwise.
 */
export function parseViewDirection(text) {
  if (text === null || text === undefined || text === '') return null;
  const parts = String(text).split(',').map((s) => s.trim());
  const v = parts.map(Number);
  if (parts.length !== 3 || parts.some((s) => s === '') || v.some((x) => !Number.isFinite(x)) || v.every((x) => x === 0))
    throw new Error(`view: "${text}" is not a direction "x,y,z" (three finite numbers, not all zero)`);
  return v;
}
