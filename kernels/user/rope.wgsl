// rope: rotary position embedding over x[heads × head_dim] at position pos
// (d0 = heads, d1 = head_dim, even; d2 = pos), pair (2i, 2i + 1) of each
// head rotated by pos · freq[i]. One invocation per pair.
//
// sin and cos are this file's own (Vulkan allows the built-ins 2^-11
// absolute error): a Cody-Waite reduction by π/2 in three parts whose
// products with k < 2^16 are exact, then cephes' sinf/cosf polynomials on
// [-π/4, π/4]. Only multiplies, adds and floor, in the order the CUDA C and
// Rust implementations use: every step is correctly rounded, so devices
// agree bit for bit unless a driver contracts a multiply-add (WGSL cannot
// forbid it), which moves a result by a few ulp.
// x and y are both read_write: rope may run in place (y == x), and WebGPU
// only lets one buffer appear in two bindings of a dispatch when both are
// writable storage.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> freq: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TWO_OVER_PI: f32 = 0.63661975;
const PIO2_1: f32 = 1.5703125;
const PIO2_2: f32 = 4.8446655e-4;
const PIO2_3: f32 = -6.3975784e-7;

fn rope_sincos(a: f32) -> vec2<f32> {
    let k = floor(a * TWO_OVER_PI + 0.5);
    let r = ((a - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    let z = r * r;
    let s = ((-1.9515296e-4 * z + 8.332161e-3) * z - 1.6666655e-1) * z * r + r;
    let c = ((2.4433157e-5 * z - 1.3887316e-3) * z + 4.1666646e-2) * z * z - 0.5 * z + 1.0;
    let q = ((i32(k) % 4) + 4) % 4;
    if (q == 0) {
        return vec2<f32>(s, c);
    }
    if (q == 1) {
        return vec2<f32>(c, -s);
    }
    if (q == 2) {
        return vec2<f32>(-s, -c);
    }
    return vec2<f32>(-c, s);
}

@compute @workgroup_size(64)
fn rope_f32(@builtin(global_invocation_id) g: vec3<u32>) {
    let half = p.d1 / 2u;
    let j = g.x;
    if (j >= p.d0 * half) {
        return;
    }
    let i = j % half;
    let at = (j / half) * p.d1 + 2u * i;
    let sc = rope_sincos(f32(p.d2) * freq[p.o1 + i]);
    let x0 = x[p.o0 + at];
    let x1 = x[p.o0 + at + 1u];
    y[p.o2 + at] = x0 * sc.y - x1 * sc.x;
    y[p.o2 + at + 1u] = x0 * sc.x + x1 * sc.y;
}
