// A cheap lit material: diffuse from a headlight plus a sky/ground hemisphere term and a little
// specular. It costs about as much as an unlit material,
// which matters with software WebGL (SwiftShader in headless Chromium, GPU-less machines), where
// MeshStandardMaterial runs at a fraction of the frame rate.
import * as THREE from 'three';

// Lighting is evaluated per vertex (Gouraud) so that the fragment shader is a plain colour write:
// software rasterizers spend their time per pixel. The headlight term uses |n.v| so that both
// sides of a face (DoubleSide) are lit.
const vertexShader = /* glsl */ `
uniform vec3 color;
uniform vec3 upView;
varying vec3 vColor;
void main() {
  vec4 mv = modelViewMatrix * vec4(position, 1.0);
  vec3 n = normalize(normalMatrix * normal);
  vec3 v = normalize(-mv.xyz);
  float nv = dot(n, v);
  float diffuse = abs(nv);
  float hemi = 0.5 + 0.5 * dot(n, upView) * sign(nv);
  float spec = pow(diffuse, 24.0) * 0.18;
  vColor = color * (0.18 + 0.62 * diffuse + 0.25 * hemi) + vec3(spec);
  gl_Position = projectionMatrix * mv;
}`;

const fragmentShader = /* glsl */ `
uniform float opacity;
varying vec3 vColor;
void main() {
  gl_FragColor = vec4(vColor, opacity);
  #include <colorspace_fragment>
}`;

export function headlightMaterial(hex, opts = {}) {
  const m = new THREE.ShaderMaterial({
    uniforms: {
      color: { value: new THREE.Color(hex) },
      opacity: { value: 1 },
      upView: { value: new THREE.Vector3(0, 1, 0) },
    },
    vertexShader,
    fragmentShader,
    side: THREE.DoubleSide,
    ...opts,
  });
  return m;
}

/** Keeps the hemisphere "up" direction fixed in world space as the camera orbits. */
export function updateUp(material, camera, worldUp) {
  const u = material.uniforms.upView.value.copy(worldUp).transformDirection(camera.matrixWorldInverse);
  return u;
}

export function setOpacity(material, opacity) {
  material.uniforms.opacity.value = opacity;
  material.transparent = opacity < 1;
  material.depthWrite = opacity >= 1;
}
