// scale_add: y[i] = fma(a, x[i], b), rounded once, as the CPU's mul_add
// (C11 bit-exact). The built-in fma may not be used: Vulkan lets a driver
// evaluate it as a multiply then an add (lavapipe does), which rounds twice.
// So the fused result is computed exactly with integer arithmetic.
// Both bindings are read_write: scale_add may run in place (x == y), and
// WebGPU only lets one buffer appear in two bindings of a dispatch when both
// are writable storage. Binding k is indexed from its view's offset p.o<k>.
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

// 64-bit unsigned integers as vec2(hi, lo).
fn shl64(v: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) {
        return v;
    }
    if (n >= 32u) {
        return vec2<u32>(v.y << (n - 32u), 0u);
    }
    return vec2<u32>((v.x << n) | (v.y >> (32u - n)), v.y << n);
}

fn shr64(v: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) {
        return v;
    }
    if (n >= 64u) {
        return vec2<u32>(0u, 0u);
    }
    if (n >= 32u) {
        return vec2<u32>(0u, v.x >> (n - 32u));
    }
    return vec2<u32>(v.x >> n, (v.y >> n) | (v.x << (32u - n)));
}

// Shift right, OR-ing every bit shifted out into bit 0 (sticky).
fn shr64_sticky(v: vec2<u32>, n: u32) -> vec2<u32> {
    let r = shr64(v, n);
    let back = shl64(r, min(n, 63u));
    var lost = any(back != v);
    if (n >= 64u) {
        lost = any(v != vec2<u32>(0u, 0u));
    }
    return vec2<u32>(r.x, r.y | select(0u, 1u, lost));
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.y + b.y;
    return vec2<u32>(a.x + b.x + select(0u, 1u, lo < a.y), lo);
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x - select(0u, 1u, a.y < b.y), a.y - b.y);
}

fn ge64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x > b.x || (a.x == b.x && a.y >= b.y);
}

fn gt64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x > b.x || (a.x == b.x && a.y > b.y);
}

// Index of the highest set bit of a nonzero value.
fn msb64(v: vec2<u32>) -> i32 {
    if (v.x != 0u) {
        return 63 - i32(countLeadingZeros(v.x));
    }
    return 31 - i32(countLeadingZeros(v.y));
}

// Product of two integers below 2^24, exactly.
fn mul24(a: u32, b: u32) -> vec2<u32> {
    let ah = a >> 16u;
    let al = a & 0xFFFFu;
    let bh = b >> 16u;
    let bl = b & 0xFFFFu;
    let mid = ah * bl + al * bh;
    return add64(vec2<u32>(ah * bh + (mid >> 16u), mid << 16u), vec2<u32>(0u, al * bl));
}

// Integer significand and exponent of a finite f32: |v| = m * 2^e.
fn significand(bits: u32) -> u32 {
    let biased = (bits >> 23u) & 0xFFu;
    if (biased == 0u) {
        return bits & 0x7FFFFFu;
    }
    return (bits & 0x7FFFFFu) | 0x800000u;
}

fn exponent(bits: u32) -> i32 {
    let biased = i32((bits >> 23u) & 0xFFu);
    return max(biased, 1) - 150;
}

fn is_finite(bits: u32) -> bool {
    return (bits & 0x7F800000u) != 0x7F800000u;
}

// fma(a, b, c) rounded once to nearest-even, as bits.
fn fma_exact(a: u32, b: u32, c: u32) -> u32 {
    if (!is_finite(a) || !is_finite(b)) {
        let a_nan = (a & 0x7FFFFFFFu) > 0x7F800000u;
        let b_nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
        let c_nan = (c & 0x7FFFFFFFu) > 0x7F800000u;
        if (a_nan || b_nan || c_nan || (a & 0x7FFFFFFFu) == 0u || (b & 0x7FFFFFFFu) == 0u) {
            // A NaN operand, or infinity times zero: NaN, in float on every device.
            return bitcast<u32>(bitcast<f32>(a) * bitcast<f32>(b) + bitcast<f32>(c));
        }
        // Infinity times a nonzero value is an infinity: decided on the bits,
        // because float arithmetic may flush a subnormal factor to zero (the
        // NVIDIA Vulkan driver does: fma(2.5e-40, inf, 3e-39) gave NaN).
        let p = ((a ^ b) & 0x80000000u) | 0x7F800000u;
        if (!is_finite(c)) {
            // inf + inf or inf - inf: no subnormal left to flush.
            return bitcast<u32>(bitcast<f32>(p) + bitcast<f32>(c));
        }
        return p;
    }
    if (!is_finite(c)) {
        return c;
    }
    let sp = (a ^ b) & 0x80000000u;
    let sc = c & 0x80000000u;
    let ma = significand(a);
    let mb = significand(b);
    let mc = significand(c);
    if (ma == 0u || mb == 0u) {
        // A zero product: c, or a signed zero if c is zero too.
        if (mc != 0u) {
            return c;
        }
        return sp & sc;
    }
    let mp = mul24(ma, mb);
    let ep = exponent(a) + exponent(b);
    let ec = exponent(c);

    // Align: the operand whose top bit is higher (the product on a tie, or
    // when c is zero) gets its top bit at bit 61; the other is shifted to
    // the same scale, bits below bit 0 folded into a sticky bit.
    let top_p = msb64(mp) + ep;
    var top_c = top_p - 1;
    if (mc != 0u) {
        top_c = 31 - i32(countLeadingZeros(mc)) + ec;
    }
    var big: vec2<u32>;
    var small: vec2<u32>;
    var s_big: u32;
    var s_small: u32;
    var e: i32; // exponent of bit 0
    var e_small: i32;
    if (top_p >= top_c) {
        big = shl64(mp, u32(61 - msb64(mp)));
        e = top_p - 61;
        s_big = sp;
        small = vec2<u32>(0u, mc);
        e_small = ec;
        s_small = sc;
    } else {
        big = shl64(vec2<u32>(0u, mc), u32(61 - (31 - i32(countLeadingZeros(mc)))));
        e = top_c - 61;
        s_big = sc;
        small = mp;
        e_small = ep;
        s_small = sp;
    }
    if (any(small != vec2<u32>(0u, 0u))) {
        let d = e_small - e;
        if (d >= 0) {
            small = shl64(small, u32(d));
        } else {
            small = shr64_sticky(small, u32(min(-d, 64)));
        }
    }

    var r: vec2<u32>;
    var sign = s_big;
    if (s_big == s_small) {
        r = add64(big, small);
    } else if (ge64(big, small)) {
        r = sub64(big, small);
    } else {
        r = sub64(small, big);
        sign = s_small;
    }
    if (all(r == vec2<u32>(0u, 0u))) {
        return 0u; // exact cancellation rounds to +0
    }

    // Round to 24 bits (fewer for a subnormal result), nearest-even.
    let q = msb64(r);
    let lsb = max(q - 23, -149 - e);
    var m: u32;
    var e2 = e + lsb;
    if (lsb <= 0) {
        m = r.y << u32(-lsb);
    } else if (lsb > 64) {
        return sign;
    } else {
        let n = u32(lsb);
        var rem = r;
        var half = vec2<u32>(0x80000000u, 0u);
        m = 0u;
        if (n < 64u) {
            let kept = shr64(r, n);
            m = kept.y;
            rem = sub64(r, shl64(kept, n));
            half = shl64(vec2<u32>(0u, 1u), n - 1u);
        }
        if (gt64(rem, half) || (all(rem == half) && (m & 1u) == 1u)) {
            m += 1u;
        }
    }
    if (m == 0x1000000u) {
        m = 0x800000u;
        e2 += 1;
    }
    if (m == 0u) {
        return sign;
    }
    if (m < 0x800000u) {
        return sign | m; // subnormal
    }
    let biased = e2 + 150;
    if (biased >= 255) {
        return sign | 0x7F800000u;
    }
    return sign | (u32(biased) << 23u) | (m & 0x7FFFFFu);
}

@compute @workgroup_size(64)
fn scale_add_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.d0) {
        y[p.o1 + i] = fma_exact(bitcast<u32>(p.s0), x[p.o0 + i], bitcast<u32>(p.s1));
    }
}
