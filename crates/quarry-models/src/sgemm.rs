//! fp32 matrix products on AVX-512F for the fused encoder ([`crate::fused`]).
//!
//! candle's matrix product is the `gemm` crate, built without its AVX-512 kernels (they need a
//! nightly compiler feature), so on an AVX-512 CPU it runs at half the vector width. This is
//! the classic packed GEMM at full width:
//!
//! * weights are packed once, at load, into panels of [`NR`] = 48 output columns, each panel
//!   k-major (for every k, the 48 columns' weights: three zmm registers);
//! * per task (a block of [`MC`] rows × a range of panels; rayon), the rows are packed per
//!   [`KC`] slice of k into tiles of [`MR`] = 8 rows, k-major (for every k, the 8 rows' values);
//! * the micro-kernel keeps an 8 × 48 tile of `y` in 24 zmm accumulators and, per k, loads
//!   three weight registers and broadcasts 8 activations into 24 FMAs (the FMA units, not the
//!   loads, are the limit);
//! * k is cut into slices of [`KC`] so that a panel's slice (`KC · 48 · 4` = 72 KiB) stays in
//!   L2 across a task's row tiles; later slices add onto the tile stored by earlier ones.
//!
//! Sums run in k order with one FMA per product, as the `gemm` crate's do: the results agree
//! with it to fp32 rounding. A plain-Rust micro-kernel with the same driver is the fallback
//! (used only where [`crate::cpu::F32Kernel::Avx512`] was forced onto another CPU).

use rayon::prelude::*;

/// Rows per micro-kernel tile.
const MR: usize = 8;
/// Columns per packed panel (three 16-lane registers).
const NR: usize = 48;
/// k per packed slice.
const KC: usize = 384;
/// Rows per parallel task.
const MC: usize = 96;

/// A linear layer's weight `[N, K]` (PyTorch's `[out, in]`), packed for
/// [`PackedF32::forward`]; no bias (the encoder adds it in its fused element-wise passes).
pub(crate) struct PackedF32 {
    k: usize,
    n: usize,
    panels: usize,
    /// Panel p holds, for each k, the weights of columns `p · NR .. p · NR + NR` (0 past n).
    packed: Vec<f32>,
    /// Whether the CPU runs the AVX-512 micro-kernel (the caller's choice, checked).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    avx512: bool,
}

impl PackedF32 {
    /// Packs `w`, `[n, k]` row-major. `avx512`: run the AVX-512F micro-kernel (ignored where
    /// the CPU lacks it).
    pub(crate) fn new(w: &[f32], n: usize, k: usize, avx512: bool) -> PackedF32 {
        debug_assert_eq!(w.len(), n * k);
        let panels = n.div_ceil(NR);
        let mut packed = vec![0f32; panels * NR * k];
        for (col, row) in w.chunks_exact(k.max(1)).take(n).enumerate() {
            let panel = &mut packed[(col / NR) * NR * k..][..NR * k];
            for (kk, &v) in row.iter().enumerate() {
                panel[kk * NR + col % NR] = v;
            }
        }
        PackedF32 {
            k,
            n,
            panels,
            packed,
            avx512: avx512 && has_avx512f(),
        }
    }

    pub(crate) fn in_features(&self) -> usize {
        self.k
    }

    pub(crate) fn out_features(&self) -> usize {
        self.n
    }

    /// `x · wᵀ` for `x` `[m, k]` row-major: `[m, n]`, on the current rayon pool.
    pub(crate) fn forward(&self, x: &[f32]) -> Vec<f32> {
        let (k, n) = (self.k, self.n);
        let m = x.len().checked_div(k).unwrap_or(0);
        let mut out = vec![0f32; m * n];
        if m == 0 || n == 0 || k == 0 {
            return out;
        }
        // Enough tasks for every thread: few rows (a short query) are split by columns too.
        let row_blocks = m.div_ceil(MC);
        let want = 2 * rayon::current_num_threads();
        let groups = if row_blocks >= want {
            1
        } else {
            want.div_ceil(row_blocks).min(self.panels)
        };
        let per_group = self.panels.div_ceil(groups);
        let groups = self.panels.div_ceil(per_group);
        let dst = SharedOut(out.as_mut_ptr());
        (0..row_blocks * groups).into_par_iter().for_each_init(
            Vec::new,
            |apack: &mut Vec<f32>, task| {
                let (rb, g) = (task / groups, task % groups);
                let r0 = rb * MC;
                let rows = (m - r0).min(MC);
                let p0 = g * per_group;
                let p1 = (p0 + per_group).min(self.panels);
                // SAFETY: `out` is `[m, n]` and outlives the loop; this task writes only rows
                // r0..r0 + rows, columns p0 · NR..min(p1 · NR, n), which no other task writes.
                unsafe { self.block(&x[r0 * k..][..rows * k], rows, p0..p1, dst, r0, apack) };
            },
        );
        out
    }

    /// Rows `x` (`rows × k`) times panels `panels`, into `out`'s rows from `r0`.
    ///
    /// # Safety
    /// `out` must point at a live `[m, n]` buffer with `r0 + rows <= m`, whose elements in
    /// these rows and panels' columns nothing else accesses meanwhile.
    unsafe fn block(
        &self,
        x: &[f32],
        rows: usize,
        panels: std::ops::Range<usize>,
        out: SharedOut,
        r0: usize,
        apack: &mut Vec<f32>,
    ) {
        let (k, n) = (self.k, self.n);
        let tiles = rows.div_ceil(MR);
        let mut tile = [0f32; MR * NR];
        for k0 in (0..k).step_by(KC) {
            let kc = (k - k0).min(KC);
            // Pack: tile t holds, for each k of the slice, its MR rows' values (0 past the
            // last row).
            apack.clear();
            apack.resize(tiles * MR * kc, 0.0);
            for (r, xr) in x.chunks_exact(k).enumerate() {
                let t = &mut apack[(r / MR) * MR * kc..][..MR * kc];
                for (kk, &v) in xr[k0..k0 + kc].iter().enumerate() {
                    t[kk * MR + r % MR] = v;
                }
            }
            let accumulate = k0 > 0;
            for p in panels.clone() {
                let b = &self.packed[p * NR * k + k0 * NR..][..kc * NR];
                let c0 = p * NR;
                let cols = (n - c0).min(NR);
                for t in 0..tiles {
                    let a = &apack[t * MR * kc..][..MR * kc];
                    let live = (rows - t * MR).min(MR);
                    let row0 = r0 + t * MR;
                    if live == MR && cols == NR {
                        // SAFETY: rows row0..row0 + MR, columns c0..c0 + NR are inside `out`
                        // and this task's (the caller's contract).
                        let c = unsafe { out.0.add(row0 * n + c0) };
                        // SAFETY: `a` holds MR · kc values, `b` kc · NR, `c` an MR × NR tile
                        // at row stride n.
                        unsafe { self.kernel(kc, a, b, c, n, accumulate) };
                        continue;
                    }
                    // An edge tile: through `tile`, only its live part copied in and out.
                    for i in 0..live {
                        // SAFETY: row row0 + i, columns c0..c0 + cols are inside `out`.
                        let src = unsafe { out.0.add((row0 + i) * n + c0) };
                        if accumulate {
                            // SAFETY: as above; `tile`'s row i holds NR >= cols values.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    src,
                                    tile[i * NR..].as_mut_ptr(),
                                    cols,
                                )
                            };
                        }
                    }
                    // SAFETY: `tile` is an MR × NR tile at row stride NR.
                    unsafe { self.kernel(kc, a, b, tile.as_mut_ptr(), NR, accumulate) };
                    for i in 0..live {
                        // SAFETY: as above, the other way round.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                tile[i * NR..].as_ptr(),
                                out.0.add((row0 + i) * n + c0),
                                cols,
                            )
                        };
                    }
                }
            }
        }
    }

    /// One MR × NR tile: `c (+)= a · b` over `kc`.
    ///
    /// # Safety
    /// `a` must hold `MR · kc` values, `b` `kc · NR`, and `c` address an MR × NR tile at row
    /// stride `ldc` that nothing else accesses meanwhile.
    unsafe fn kernel(
        &self,
        kc: usize,
        a: &[f32],
        b: &[f32],
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        debug_assert!(a.len() >= MR * kc && b.len() >= kc * NR);
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // SAFETY: AVX-512F was detected (`new`); the rest is the caller's contract.
            unsafe { x86::kernel(kc, a.as_ptr(), b.as_ptr(), c, ldc, accumulate) };
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { kernel_portable(kc, a, b, c, ldc, accumulate) };
    }
}

/// The micro-kernel's arithmetic in plain Rust (same order of FMAs).
///
/// # Safety
/// As [`PackedF32::kernel`].
unsafe fn kernel_portable(
    kc: usize,
    a: &[f32],
    b: &[f32],
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let mut acc = [[0f32; NR]; MR];
    if accumulate {
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: the tile's row i holds NR values (the caller's contract).
            unsafe { std::ptr::copy_nonoverlapping(c.add(i * ldc), row.as_mut_ptr(), NR) };
        }
    }
    for kk in 0..kc {
        let bk = &b[kk * NR..][..NR];
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = a[kk * MR + i];
            for (o, &bv) in row.iter_mut().zip(bk) {
                *o = ai.mul_add(bv, *o);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), c.add(i * ldc), NR) };
    }
}

/// The output, written by several tasks at once: each writes only its own rows and panels'
/// columns, so no two tasks touch the same element.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: see the type's documentation; the buffer outlives the parallel loop.
unsafe impl Send for SharedOut {}
// SAFETY: as above.
unsafe impl Sync for SharedOut {}

fn has_avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::sgemm::{MR, NR};
    use std::arch::x86_64::*;

    /// `c (+)= a · b` for an MR × NR tile in 24 zmm accumulators: per k, three loads of `b`,
    /// eight broadcasts of `a`, 24 FMAs.
    ///
    /// # Safety
    /// AVX-512F; `a` must address `MR · kc` values, `b` `kc · NR`, `c` an MR × NR tile at row
    /// stride `ldc` that nothing else accesses meanwhile.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn kernel(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 3]; MR];
        if accumulate {
            for (i, row) in acc.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    // SAFETY: inside the tile (the caller's contract).
                    *v = unsafe { _mm512_loadu_ps(c.add(i * ldc + j * 16)) };
                }
            }
        }
        for kk in 0..kc {
            // SAFETY: `kk < kc`: within `a`'s MR · kc and `b`'s kc · NR values.
            unsafe {
                let bk = b.add(kk * NR);
                let bv = [
                    _mm512_loadu_ps(bk),
                    _mm512_loadu_ps(bk.add(16)),
                    _mm512_loadu_ps(bk.add(32)),
                ];
                let ak = a.add(kk * MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*ak.add(i));
                    for (v, &bj) in row.iter_mut().zip(&bv) {
                        *v = _mm512_fmadd_ps(ai, bj, *v);
                    }
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                // SAFETY: inside the tile (the caller's contract).
                unsafe { _mm512_storeu_ps(c.add(i * ldc + j * 16), v) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect()
    }

    /// In f64, with each output's bound from the sum of |products| (fp32 rounding of a
    /// length-k dot product).
    fn check(got: &[f32], x: &[f32], w: &[f32], m: usize, n: usize, k: usize, what: &str) {
        assert_eq!(got.len(), m * n);
        for r in 0..m {
            for c in 0..n {
                let (mut s, mut abs) = (0f64, 0f64);
                for j in 0..k {
                    let p = x[r * k + j] as f64 * w[c * k + j] as f64;
                    s += p;
                    abs += p.abs();
                }
                let g = got[r * n + c] as f64;
                assert!(
                    (g - s).abs() <= abs * 1e-5 + 1e-6,
                    "{what} ({m},{n},{k}) y[{r},{c}] = {g}, want {s}"
                );
            }
        }
    }

    const SHAPES: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (3, 17, 7),
        (8, 48, 384),
        (9, 49, 385),
        (100, 384, 384),
        (133, 100, 130),
        (97, 1152, 384),
        (37, 384, 1536),
        (200, 1536, 384),
        (5, 50, 800),
    ];

    #[test]
    fn avx512_kernel_matches_reference() {
        if !has_avx512f() {
            eprintln!("skipped: this CPU has no AVX-512F");
            return;
        }
        for &(m, n, k) in SHAPES {
            let (x, w) = (data(m * k, 1), data(n * k, 2));
            let p = PackedF32::new(&w, n, k, true);
            assert!(p.avx512);
            check(&p.forward(&x), &x, &w, m, n, k, "avx512");
        }
    }

    #[test]
    fn portable_kernel_matches_reference() {
        for &(m, n, k) in SHAPES {
            let (x, w) = (data(m * k, 3), data(n * k, 4));
            let p = PackedF32::new(&w, n, k, false);
            check(&p.forward(&x), &x, &w, m, n, k, "portable");
        }
    }

    /// Against candle's matrix product (the `gemm` crate), which the fp32 path replaces.
    #[test]
    fn agrees_with_the_gemm_crate() {
        use candle_core::{Device, Tensor};
        let (m, n, k) = (77, 1152, 384);
        let (x, w) = (data(m * k, 5), data(n * k, 6));
        let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).unwrap();
        let wt = Tensor::from_vec(w.clone(), (n, k), &Device::Cpu).unwrap();
        let want: Vec<f32> = xt
            .matmul(&wt.t().unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for avx512 in [true, false] {
            let got = PackedF32::new(&w, n, k, avx512).forward(&x);
            for (g, e) in got.iter().zip(&want) {
                assert!((g - e).abs() <= 1e-5 * e.abs().max(1.0), "{g} vs gemm {e}");
            }
        }
    }

    #[test]
    fn empty_inputs_give_empty_or_zero_outputs() {
        let p = PackedF32::new(&[], 0, 4, true);
        assert!(p.forward(&[1.0; 8]).is_empty());
        let p = PackedF32::new(&data(12, 1), 3, 4, true);
        assert!(p.forward(&[]).is_empty());
    }
}
