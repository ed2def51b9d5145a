//! int8 matrix products for the fused encoder ([`crate::local::Engine::FusedInt8`]).
//!
//! The scheme is ONNX Runtime's dynamic quantisation for CPUs without VNNI ("U8S8" with a
//! reduced weight range):
//!
//! * weights are quantised once, at load, symmetrically per output column to 7 bits
//!   (`-63..=63`, scale `max|w| / 63`);
//! * activations are quantised per row, on every product, asymmetrically to `u8` (scale
//!   `(max - min) / 255` and a zero point, with 0 inside the range);
//! * the AVX2 kernel multiplies with `vpmaddubsw` (u8 × i8 pairs summed into i16) and
//!   `vpmaddwd` against ones (pairs of i16 summed into i32): 32 products in three
//!   instructions where fp32 FMA does 8 in one. Seven-bit weights are what keeps the i16 sum
//!   of two products from saturating (`2 · 255 · 63 < 32 767`).
//!
//! `y[m, n] = s_a[m] · s_w[n] · (Σ_k a[m, k] · q[k, n] − z[m] · Σ_k q[k, n])`: the zero
//! point's share is taken out with each column's precomputed sum.
//!
//! On this repository's reference CPU (Zen 3, no AVX-VNNI) the instruction mix peaks at
//! 1.77× fp32 FMA (`examples/int8_peak.rs`). Without AVX2 the same integer arithmetic runs
//! in plain Rust (slow, but exactly the same results).
//!
//! Where the CPU has VNNI ([`crate::cpu`]), `vpdpbusd` does the four u8 × i8 products and their
//! sum into an i32 lane in one instruction, with no i16 step that could saturate: weights then
//! take the full 8-bit range (`-127..=127`, four times finer steps than 7 bits). AVX512-VNNI
//! runs an 8-row × 48-column kernel (24 zmm accumulators: three 16-column panels of the same
//! packing side by side); AVX-VNNI (256-bit, CPUs without AVX-512) the AVX2 kernel's 4 × 16
//! tiles with `vpdpbusd` in place of the three-instruction sequence. The weights' range is
//! chosen with the kernel, once, in [`QuantLinear::new`]; the portable kernel computes the
//! same i32 sums for either range, so every SIMD kernel is checked bit for bit against it.

use rayon::prelude::*;

use crate::cpu::Int8Kernel;

/// Columns per packed weight panel (two AVX2 registers of 8 i32 sums).
const NR: usize = 16;
/// Rows per kernel call.
const MR: usize = 4;
/// Rows per parallel task: their quantised activations (`ROWS_PER_TASK × K` bytes) stay in
/// L2 while every weight panel passes over them.
const ROWS_PER_TASK: usize = 64;
/// Largest weight magnitude after quantisation for `vpmaddubsw` (7 bits: see the module docs).
const W_MAX_7BIT: f32 = 63.0;
/// Largest weight magnitude for the VNNI kernels (8 bits; -128 is left out so the range is
/// symmetric).
const W_MAX_8BIT: f32 = 127.0;
/// Rows per AVX512-VNNI kernel call.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MR_VNNI: usize = 8;
/// 16-column panels per AVX512-VNNI kernel call.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const PANELS_VNNI: usize = 3;

/// A linear layer's weight `[N, K]` (PyTorch's `[out, in]`), quantised and packed for
/// [`QuantLinear::forward`]; no bias (the encoder adds it in its fused element-wise passes).
pub(crate) struct QuantLinear {
    k: usize,
    n: usize,
    /// `k` rounded up to a multiple of 4 (`vpmaddubsw` + `vpmaddwd` consume 4 k per lane).
    kp: usize,
    /// Panels of `NR` columns; in each, per group of 4 k, the 4 weights of column 0, of
    /// column 1, … of column 15 (64 bytes). Padding columns and k are 0.
    packed: Vec<i8>,
    scale: Vec<f32>,
    col_sum: Vec<i32>,
    /// The kernel the weights were quantised for.
    kernel: Int8Kernel,
}

impl QuantLinear {
    /// Quantises `w`, `[n, k]` row-major, for `kernel` (which the caller has checked the CPU
    /// runs: [`crate::cpu::KernelPath::int8_kernel`]).
    pub(crate) fn new(w: &[f32], n: usize, k: usize, kernel: Int8Kernel) -> QuantLinear {
        debug_assert_eq!(w.len(), n * k);
        let w_max = match kernel {
            Int8Kernel::Portable | Int8Kernel::Avx2 => W_MAX_7BIT,
            Int8Kernel::AvxVnni | Int8Kernel::Avx512Vnni => W_MAX_8BIT,
        };
        let kp = k.div_ceil(4) * 4;
        let panels = n.div_ceil(NR);
        let mut packed = vec![0i8; panels * NR * kp];
        // Padded to whole panels (scale 0: padding columns give 0).
        let mut scale = vec![0f32; panels * NR];
        let mut col_sum = vec![0i32; panels * NR];
        for col in 0..n {
            let row = &w[col * k..][..k];
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            scale[col] = if amax > 0.0 && amax.is_finite() {
                amax / w_max
            } else {
                1.0
            };
            let inv = 1.0 / scale[col];
            let (panel, c) = (col / NR, col % NR);
            let base = panel * NR * kp;
            let mut sum = 0i32;
            for (kk, &v) in row.iter().enumerate() {
                // Rounds half away from zero, as `round()` would, without its libm call.
                let t = (v * inv).clamp(-w_max, w_max);
                let q = (t + 0.5f32.copysign(t)) as i8;
                sum += q as i32;
                packed[base + (kk / 4) * NR * 4 + c * 4 + kk % 4] = q;
            }
            col_sum[col] = sum;
        }
        QuantLinear {
            k,
            n,
            kp,
            packed,
            scale,
            col_sum,
            kernel,
        }
    }

    pub(crate) fn in_features(&self) -> usize {
        self.k
    }

    pub(crate) fn out_features(&self) -> usize {
        self.n
    }

    /// Bytes the packed weights and their scales hold.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.packed.len() + self.scale.len() * 4 + self.col_sum.len() * 4
    }

    /// `x · wᵀ` for `x` `[m, k]` row-major: `[m, n]`. Rows are split across the current rayon
    /// pool's threads.
    pub(crate) fn forward(&self, x: &[f32]) -> Vec<f32> {
        let (k, n) = (self.k, self.n);
        debug_assert_eq!(x.len() % k.max(1), 0);
        let m = x.len().checked_div(k).unwrap_or(0);
        let mut out = vec![0f32; m * n];
        if m == 0 || n == 0 {
            return out;
        }
        out.par_chunks_mut(ROWS_PER_TASK * n)
            .zip(x.par_chunks(ROWS_PER_TASK * k))
            .for_each(|(out, x)| self.rows(x, out, self.kernel));
        out
    }

    /// One task's rows: quantise them, then run every panel over them with `kernel` (the
    /// weights' own, or in tests the portable one).
    fn rows(&self, x: &[f32], out: &mut [f32], kernel: Int8Kernel) {
        let (k, kp, n) = (self.k, self.kp, self.n);
        let rows = x.len() / k;
        // Every SIMD kernel's CPU has AVX2 (see `crate::cpu`).
        let avx2 = kernel != Int8Kernel::Portable;
        let mut a = vec![0u8; rows * kp];
        let mut a_scale = vec![0f32; rows];
        let mut a_zero = vec![0i32; rows];
        for r in 0..rows {
            let (x, a) = (&x[r * k..][..k], &mut a[r * kp..][..k]);
            let (scale, zero) = row_range(x);
            if avx2 {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 was detected.
                unsafe {
                    x86::quantize(x, a, 1.0 / scale, zero)
                };
            } else {
                quantize(x, a, 1.0 / scale, zero);
            }
            (a_scale[r], a_zero[r]) = (scale, zero as i32);
        }
        #[cfg(target_arch = "x86_64")]
        if kernel == Int8Kernel::Avx512Vnni {
            self.rows_vnni512(&a, &a_scale, &a_zero, out);
            return;
        }
        let mut tile = [[0f32; NR]; MR];
        for panel in 0..n.div_ceil(NR) {
            let w = &self.packed[panel * NR * kp..][..NR * kp];
            let cols = (n - panel * NR).min(NR);
            let ws = Dequant {
                scale: self.scale[panel * NR..][..NR]
                    .try_into()
                    .unwrap_or(&[0.0; NR]),
                col_sum: self.col_sum[panel * NR..][..NR]
                    .try_into()
                    .unwrap_or(&[0; NR]),
            };
            for r0 in (0..rows).step_by(MR) {
                let live = (rows - r0).min(MR);
                // Rows past the end repeat the last one; their results are dropped.
                let row = |i: usize| r0 + i.min(live - 1);
                let rows_a: [&[u8]; MR] = std::array::from_fn(|i| &a[row(i) * kp..][..kp]);
                let sa: [f32; MR] = std::array::from_fn(|i| a_scale[row(i)]);
                let za: [i32; MR] = std::array::from_fn(|i| a_zero[row(i)]);
                let whole = live == MR && cols == NR;
                if avx2 {
                    #[cfg(target_arch = "x86_64")]
                    {
                        // A whole tile is written straight into `out`, else into `tile`.
                        let y: [*mut f32; MR] = if whole {
                            let base = out[r0 * n + panel * NR..].as_mut_ptr();
                            // SAFETY: rows r0..r0 + MR of `out` exist (`live == MR`).
                            std::array::from_fn(|i| unsafe { base.add(i * n) })
                        } else {
                            std::array::from_fn(|i| tile[i].as_mut_ptr())
                        };
                        // SAFETY: AVX2 (and for `AvxVnni` AVX-VNNI) was detected; every row
                        // of `a` holds `kp` bytes, `w` `NR · kp`, and each `y[i]` points at
                        // `NR` writable floats (of `out`'s row r0 + i from column panel · NR,
                        // or of `tile`).
                        unsafe {
                            if kernel == Int8Kernel::AvxVnni {
                                x86::kernel_vnni256(&rows_a, w, kp, &ws, &sa, &za, &y)
                            } else {
                                x86::kernel(&rows_a, w, kp, &ws, &sa, &za, &y)
                            }
                        };
                        if whole {
                            continue;
                        }
                    }
                } else {
                    kernel_portable(&rows_a, w, kp, &ws, &sa, &za, &mut tile);
                }
                for (i, y) in tile.iter().take(live).enumerate() {
                    out[(r0 + i) * n + panel * NR..][..cols].copy_from_slice(&y[..cols]);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl QuantLinear {
    /// [`QuantLinear::rows`]' products on AVX512-VNNI: `MR_VNNI` rows × up to
    /// `PANELS_VNNI` panels per kernel call, over the quantised rows `a` (`kp` bytes each).
    fn rows_vnni512(&self, a: &[u8], a_scale: &[f32], a_zero: &[i32], out: &mut [f32]) {
        let (kp, n) = (self.kp, self.n);
        let rows = a_scale.len();
        let panels = n.div_ceil(NR);
        let mut tile = [[0f32; NR * PANELS_VNNI]; MR_VNNI];
        for p0 in (0..panels).step_by(PANELS_VNNI) {
            let np = (panels - p0).min(PANELS_VNNI);
            let w = &self.packed[p0 * NR * kp..][..np * NR * kp];
            let c0 = p0 * NR;
            let cols = (n - c0).min(np * NR);
            let scale = &self.scale[c0..][..np * NR];
            let col_sum = &self.col_sum[c0..][..np * NR];
            for r0 in (0..rows).step_by(MR_VNNI) {
                let live = (rows - r0).min(MR_VNNI);
                // Rows past the end repeat the last one; their results are dropped.
                let row = |i: usize| r0 + i.min(live - 1);
                let rows_a: [&[u8]; MR_VNNI] = std::array::from_fn(|i| &a[row(i) * kp..][..kp]);
                let sa: [f32; MR_VNNI] = std::array::from_fn(|i| a_scale[row(i)]);
                let za: [i32; MR_VNNI] = std::array::from_fn(|i| a_zero[row(i)]);
                let whole = live == MR_VNNI && cols == np * NR;
                let y: [*mut f32; MR_VNNI] = if whole {
                    let base = out[r0 * n + c0..].as_mut_ptr();
                    // SAFETY: rows r0..r0 + MR_VNNI of `out` exist (`live == MR_VNNI`).
                    std::array::from_fn(|i| unsafe { base.add(i * n) })
                } else {
                    std::array::from_fn(|i| tile[i].as_mut_ptr())
                };
                // SAFETY: `Int8Kernel::Avx512Vnni` is only chosen where the CPU has AVX-512F,
                // BW and VNNI (`crate::cpu`); each row of `a` holds `kp` bytes, `w` `np` panels
                // of `NR · kp`, `scale`/`col_sum` `np · NR` values, and each `y[i]` points at
                // `np · NR` writable floats (a whole tile of `out`, or `tile`).
                unsafe {
                    match np {
                        1 => x86::kernel_vnni512::<1>(&rows_a, w, kp, scale, col_sum, &sa, &za, &y),
                        2 => x86::kernel_vnni512::<2>(&rows_a, w, kp, scale, col_sum, &sa, &za, &y),
                        _ => x86::kernel_vnni512::<3>(&rows_a, w, kp, scale, col_sum, &sa, &za, &y),
                    }
                }
                if !whole {
                    for (i, y) in tile.iter().take(live).enumerate() {
                        out[(r0 + i) * n + c0..][..cols].copy_from_slice(&y[..cols]);
                    }
                }
            }
        }
    }
}

/// One row of activations' quantisation: its scale and zero point (`u8 = x / scale + zero`),
/// with 0 inside the range so that it is exact.
fn row_range(x: &[f32]) -> (f32, f32) {
    let (lo, hi) = x
        .iter()
        .fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let scale = if hi > lo && (hi - lo).is_finite() {
        (hi - lo) / 255.0
    } else {
        1.0
    };
    (scale, (-lo / scale).round().clamp(0.0, 255.0))
}

/// Quantises a row of activations to `u8` (`inv` = 1 / scale).
fn quantize(x: &[f32], a: &mut [u8], inv: f32, zero: f32) {
    for (q, &v) in a.iter_mut().zip(x) {
        // Non-negative after the clamp, so `+ 0.5` then truncation rounds.
        *q = ((v * inv + zero).clamp(0.0, 255.0) + 0.5) as u8;
    }
}

/// One panel's column scales and sums, for turning integer sums back into `f32`.
struct Dequant<'a> {
    scale: &'a [f32; NR],
    col_sum: &'a [i32; NR],
}

/// The kernel's arithmetic in plain Rust: `y[i][c] = s_a[i] · s_w[c] · (Σ_k a_i[k] · w[k, c] −
/// z_i · Σ_k w[k, c])` over one panel.
fn kernel_portable(
    a: &[&[u8]; MR],
    w: &[i8],
    kp: usize,
    ws: &Dequant,
    sa: &[f32; MR],
    za: &[i32; MR],
    y: &mut [[f32; NR]; MR],
) {
    let mut acc = [[0i32; NR]; MR];
    for q in 0..kp / 4 {
        let wq = &w[q * NR * 4..][..NR * 4];
        for (row, sums) in a.iter().zip(acc.iter_mut()) {
            let av = &row[q * 4..][..4];
            for (c, s) in sums.iter_mut().enumerate() {
                let wc = &wq[c * 4..][..4];
                *s += (0..4).map(|j| av[j] as i32 * wc[j] as i32).sum::<i32>();
            }
        }
    }
    for i in 0..MR {
        for c in 0..NR {
            let v = (acc[i][c] - za[i] * ws.col_sum[c]) as f32;
            y[i][c] = v * (sa[i] * ws.scale[c]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::qgemm::{Dequant, MR, MR_VNNI, NR};
    use std::arch::x86_64::*;

    /// [`super::quantize`], 32 values per step (same arithmetic, so the same bytes).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize(x: &[f32], a: &mut [u8], inv: f32, zero: f32) {
        let n = x.len().min(a.len());
        let (vinv, vzero) = (_mm256_set1_ps(inv), _mm256_set1_ps(zero));
        let (lo, hi, half) = (
            _mm256_setzero_ps(),
            _mm256_set1_ps(255.0),
            _mm256_set1_ps(0.5),
        );
        // packus works within 128-bit lanes; this puts the 8-byte groups back in order.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut i = 0;
        while i + 32 <= n {
            // SAFETY: `i + 32 <= n` values of `x` read and bytes of `a` written.
            unsafe {
                let q = |j: usize| {
                    let v = _mm256_loadu_ps(x.as_ptr().add(i + j));
                    let v = _mm256_add_ps(_mm256_mul_ps(v, vinv), vzero);
                    _mm256_cvttps_epi32(_mm256_add_ps(
                        _mm256_min_ps(_mm256_max_ps(v, lo), hi),
                        half,
                    ))
                };
                let (q0, q1, q2, q3) = (q(0), q(8), q(16), q(24));
                let bytes =
                    _mm256_packus_epi16(_mm256_packus_epi32(q0, q1), _mm256_packus_epi32(q2, q3));
                _mm256_storeu_si256(
                    a.as_mut_ptr().add(i) as *mut __m256i,
                    _mm256_permutevar8x32_epi32(bytes, order),
                );
            }
            i += 32;
        }
        crate::qgemm::quantize(&x[i..n], &mut a[i..n], inv, zero);
    }

    /// Defines a 256-bit `MR × NR` kernel over one panel, 4 k per step: each row's 4
    /// activations broadcast to every lane, multiplied against the panel's two registers of
    /// 8 columns × 4 k and summed per column into an i32 lane by `$step`.
    macro_rules! kernel256 {
        ($(#[$doc:meta])* $name:ident, $features:literal, |$acc:ident, $av:ident, $w:ident| $step:expr) => {
            $(#[$doc])*
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name(
                a: &[&[u8]; MR],
                w: &[i8],
                kp: usize,
                ws: &Dequant,
                sa: &[f32; MR],
                za: &[i32; MR],
                y: &[*mut f32; MR],
            ) {
                debug_assert!(w.len() >= NR * kp && a.iter().all(|r| r.len() >= kp));
                let mut c = [[_mm256_setzero_si256(); 2]; MR];
                let wp = w.as_ptr();
                let ap: [*const u8; MR] = std::array::from_fn(|i| a[i].as_ptr());
                for q in 0..kp / 4 {
                    // SAFETY: `q * 4 + 4 <= kp` bytes of each row and `q * 64 + 64 <= NR * kp`
                    // bytes of the panel are read, checked above.
                    unsafe {
                        let w0 = _mm256_loadu_si256(wp.add(q * 64) as *const __m256i);
                        let w1 = _mm256_loadu_si256(wp.add(q * 64 + 32) as *const __m256i);
                        for (row, acc) in ap.iter().zip(c.iter_mut()) {
                            let $av = _mm256_set1_epi32((row.add(q * 4) as *const i32).read_unaligned());
                            for (half, $w) in [w0, w1].into_iter().enumerate() {
                                let $acc = acc[half];
                                acc[half] = $step;
                            }
                        }
                    }
                }
                // SAFETY: `ws` and each `y[i]` hold 16 values (the caller's contract): two
                // unaligned 8-lane accesses each.
                unsafe {
                    let sw = [
                        _mm256_loadu_ps(ws.scale.as_ptr()),
                        _mm256_loadu_ps(ws.scale.as_ptr().add(8)),
                    ];
                    let cs = [
                        _mm256_loadu_si256(ws.col_sum.as_ptr() as *const __m256i),
                        _mm256_loadu_si256(ws.col_sum.as_ptr().add(8) as *const __m256i),
                    ];
                    for (i, acc) in c.into_iter().enumerate() {
                        let z = _mm256_set1_epi32(za[i]);
                        let s = _mm256_set1_ps(sa[i]);
                        for (half, acc) in acc.into_iter().enumerate() {
                            let v = _mm256_sub_epi32(acc, _mm256_mullo_epi32(z, cs[half]));
                            let f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(s, sw[half]));
                            _mm256_storeu_ps(y[i].add(half * 8), f);
                        }
                    }
                }
            }
        };
    }

    kernel256!(
        /// AVX2: `vpmaddubsw` (pairs of u8 × i8 into i16), then `vpmaddwd` against ones (pairs
        /// of i16 into i32), then `vpaddd`.
        kernel, "avx2", |acc, av, w| _mm256_add_epi32(
            acc,
            _mm256_madd_epi16(_mm256_maddubs_epi16(av, w), _mm256_set1_epi16(1)),
        )
    );

    kernel256!(
        /// AVX-VNNI: one `vpdpbusd` (four u8 × i8 products summed into the i32 lane).
        kernel_vnni256, "avx2,avxvnni", |acc, av, w| _mm256_dpbusd_avx_epi32(acc, av, w)
    );

    /// `MR_VNNI × (P · NR)` sums over `P` adjacent panels, 4 k per step: each row's 4
    /// activations broadcast to every lane, one `vpdpbusd` per panel register (16 columns ×
    /// 4 k); then `y = s_a · s_w · (sum − z · col_sum)` as in [`super::kernel_portable`].
    /// `scale` and `col_sum` hold the `P · NR` columns' values, `y[i]` points at `P · NR`
    /// writable floats.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn kernel_vnni512<const P: usize>(
        a: &[&[u8]; MR_VNNI],
        w: &[i8],
        kp: usize,
        scale: &[f32],
        col_sum: &[i32],
        sa: &[f32; MR_VNNI],
        za: &[i32; MR_VNNI],
        y: &[*mut f32; MR_VNNI],
    ) {
        debug_assert!(w.len() >= P * NR * kp && a.iter().all(|r| r.len() >= kp));
        debug_assert!(scale.len() >= P * NR && col_sum.len() >= P * NR);
        let mut c = [[_mm512_setzero_si512(); P]; MR_VNNI];
        let wp = w.as_ptr();
        let ap: [*const u8; MR_VNNI] = std::array::from_fn(|i| a[i].as_ptr());
        for q in 0..kp / 4 {
            // SAFETY: `q * 4 + 4 <= kp` bytes of each row and, in panel p, bytes
            // `p · NR · kp + q · 64 ..+ 64` (within `P · NR · kp`) are read, checked above.
            unsafe {
                let wv: [__m512i; P] = std::array::from_fn(|p| {
                    _mm512_loadu_si512(wp.add(p * NR * kp + q * 64) as *const _)
                });
                for (row, acc) in ap.iter().zip(c.iter_mut()) {
                    let av = _mm512_set1_epi32((row.add(q * 4) as *const i32).read_unaligned());
                    for (acc, &w) in acc.iter_mut().zip(&wv) {
                        *acc = _mm512_dpbusd_epi32(*acc, av, w);
                    }
                }
            }
        }
        // SAFETY: `scale`, `col_sum` and each `y[i]` hold `P · NR` values (checked above /
        // the caller's contract): P unaligned 16-lane accesses each.
        unsafe {
            let sw: [__m512; P] =
                std::array::from_fn(|p| _mm512_loadu_ps(scale.as_ptr().add(p * NR)));
            let cs: [__m512i; P] = std::array::from_fn(|p| {
                _mm512_loadu_si512(col_sum.as_ptr().add(p * NR) as *const _)
            });
            for (i, acc) in c.into_iter().enumerate() {
                let z = _mm512_set1_epi32(za[i]);
                let s = _mm512_set1_ps(sa[i]);
                for (p, acc) in acc.into_iter().enumerate() {
                    let v = _mm512_sub_epi32(acc, _mm512_mullo_epi32(z, cs[p]));
                    let f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(s, sw[p]));
                    _mm512_storeu_ps(y[i].add(p * NR), f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::KernelPath;

    /// A deterministic spread of values, with a few large ones (as BERT's outlier dims).
    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let v = (s % 20_001) as f32 / 10_000.0 - 1.0;
                if i % 97 == 0 { v * 8.0 } else { v }
            })
            .collect()
    }

    fn reference(x: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for r in 0..m {
            for c in 0..n {
                y[r * n + c] = (0..k)
                    .map(|j| x[r * k + j] as f64 * w[c * k + j] as f64)
                    .sum::<f64>() as f32;
            }
        }
        y
    }

    /// The int8 kernels this CPU runs (each path whose own kernel it has); the others are
    /// named as skipped.
    fn kernels() -> Vec<Int8Kernel> {
        KernelPath::ALL
            .into_iter()
            .filter(|p| {
                let native = p.int8_native();
                if !native {
                    eprintln!("skipped: this CPU has no {p:?} int8 kernel");
                }
                native
            })
            .map(KernelPath::int8_kernel)
            .collect()
    }

    const SHAPES: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (3, 17, 7),
        (70, 40, 384),
        (133, 100, 130),
        (5, 384, 1536),
        (9, 49, 385),
        (64, 1152, 384),
        (131, 1536, 384),
        (17, 384, 1536),
    ];

    /// Edges everywhere: k not a multiple of 4, n not a multiple of 16 or 48, rows not a
    /// multiple of 4, 8 or of a task, a zero row and a zero column; on every kernel.
    #[test]
    fn matches_fp32_within_quantisation_error() {
        for kernel in kernels() {
            for &(m, n, k) in SHAPES {
                let mut x = data(m * k, 1);
                let mut w = data(n * k, 2);
                x[..k].iter_mut().for_each(|v| *v = 0.0);
                w[..k].iter_mut().for_each(|v| *v = 0.0);
                let q = QuantLinear::new(&w, n, k, kernel);
                let got = q.forward(&x);
                let want = reference(&x, &w, m, n, k);
                assert_eq!(got.len(), want.len());
                // Error bound per output: both quantisation steps, summed over k, as a share
                // of the row's and column's scale (not of the result, which may be near 0).
                for r in 0..m {
                    let xr = &x[r * k..][..k];
                    let xmax = xr.iter().fold(0f32, |a, v| a.max(v.abs()));
                    for c in 0..n {
                        let wr = &w[c * k..][..k];
                        let wmax = wr.iter().fold(0f32, |a, v| a.max(v.abs()));
                        let bound = (k as f32).sqrt() * xmax * wmax * 0.05 + 1e-6;
                        let (g, e) = (got[r * n + c], want[r * n + c]);
                        assert!(
                            (g - e).abs() <= bound,
                            "{kernel:?} ({m},{n},{k}) y[{r},{c}] = {g}, fp32 {e}, bound {bound}"
                        );
                    }
                }
                assert!(got[..n].iter().all(|&v| v == 0.0), "a zero row gives zeros");
                assert!(
                    (0..m).all(|r| got[r * n] == 0.0),
                    "a zero column gives zeros"
                );
            }
        }
    }

    /// Every SIMD kernel and the portable one agree exactly on the same weights (same
    /// integer sums, same epilogue), on ragged shapes.
    #[test]
    fn simd_and_portable_kernels_agree() {
        for kernel in kernels() {
            for &(m, n, k) in SHAPES.iter().chain(&[(37, 50, 260), (200, 1152, 384)]) {
                let x = data(m * k, 3);
                let w = data(n * k, 4);
                let q = QuantLinear::new(&w, n, k, kernel);
                let mut simd = vec![1f32; m * n];
                let mut portable = vec![2f32; m * n];
                q.rows(&x, &mut simd, kernel);
                q.rows(&x, &mut portable, Int8Kernel::Portable);
                assert_eq!(simd, portable, "{kernel:?} ({m},{n},{k})");
            }
        }
    }

    /// 8-bit weights (VNNI) are closer to fp32 than 7-bit ones.
    #[test]
    fn eight_bit_weights_are_more_accurate() {
        let (m, n, k) = (64, 96, 384);
        let (x, w) = (data(m * k, 7), data(n * k, 8));
        let want = reference(&x, &w, m, n, k);
        let err = |kernel| {
            let got = QuantLinear::new(&w, n, k, kernel).forward(&x);
            got.iter()
                .zip(&want)
                .map(|(g, e)| ((g - e) as f64).powi(2))
                .sum::<f64>()
        };
        // The portable kernel runs either range: compare like with like.
        let (seven, eight) = (err(Int8Kernel::Portable), {
            let q = QuantLinear::new(&w, n, k, Int8Kernel::Avx512Vnni);
            let mut got = vec![0f32; m * n];
            q.rows(&x, &mut got, Int8Kernel::Portable);
            got.iter()
                .zip(&want)
                .map(|(g, e)| ((g - e) as f64).powi(2))
                .sum::<f64>()
        });
        assert!(eight < seven * 0.8, "8-bit error {eight} vs 7-bit {seven}");
    }

    #[test]
    fn weights_take_a_quarter_of_fp32() {
        let q = QuantLinear::new(&data(384 * 1536, 5), 384, 1536, Int8Kernel::Portable);
        assert!(q.bytes() < 384 * 1536 * 4 / 4 + 384 * 8 + 1);
    }
}
