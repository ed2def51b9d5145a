//! Element-wise kernels of the fused encoder ([`crate::fused`]), compiled twice: for the
//! x86-64 baseline (SSE2, 4 lanes) and with AVX2 + FMA (8 lanes, fused multiply-add), the
//! second chosen at run time when the CPU has both. Release builds target the baseline so
//! that one binary runs everywhere; without the dispatch these loops would never use the
//! wider registers the matrix products (gemm, which dispatches itself) already use.
//!
//! Every reduction (row maximum, sums for softmax and LayerNorm) keeps [`LANES`]
//! independent accumulators: a plain `iter().sum()` is one sequential chain of float
//! additions, which the compiler may not reorder, so it runs one element at a time. Profiling
//! showed the scalar softmax of the attention scores alone took 30 % of the forward pass at
//! page-length inputs.
//!
//! exp and erf are polynomial approximations (no libm calls, so they vectorise):
//! exp a Cephes-style polynomial (relative error ~2e-7), erf the rational approximation Eigen
//! and XLA use for f32 (absolute error < 5e-7).

/// Activation of the feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    GeluErf,
    GeluTanh,
    Relu,
}

/// Independent accumulators per reduction: two AVX registers, four SSE ones, enough to hide
/// the latency of the float additions.
const LANES: usize = 16;

/// How `a·b + c` is computed: a separate multiply and add on the baseline, one fused
/// instruction where the CPU has FMA (never a libm call).
trait Isa {
    fn madd(a: f32, b: f32, c: f32) -> f32;
}

struct Baseline;
impl Isa for Baseline {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2Fma;
#[cfg(target_arch = "x86_64")]
impl Isa for Avx2Fma {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// Defines `pub(crate) fn $name(args)` that runs `$generic::<Avx2Fma>` where the CPU has
/// AVX2 and FMA, else `$generic::<Baseline>`. The feature test is a cached atomic load in
/// std, cheap next to a row of work.
macro_rules! dispatched {
    ($(#[$doc:meta])* fn $name:ident => $generic:ident ( $($arg:ident : $ty:ty),* $(,)? )) => {
        $(#[$doc])*
        pub(crate) fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn wide($($arg: $ty),*) {
                    $generic::<Avx2Fma>($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA, tested just above.
                    return unsafe { wide($($arg),*) };
                }
            }
            $generic::<Baseline>($($arg),*)
        }
    };
}

dispatched! {
    /// Softmax of each `n`-long row of `scores`, in place.
    fn softmax_rows => softmax_rows_impl(scores: &mut [f32], n: usize)
}

dispatched! {
    /// `row = act(row + bias)`.
    fn bias_act_row => bias_act_row_impl(row: &mut [f32], bias: &[f32], act: Act)
}

dispatched! {
    /// `row = LayerNorm(row + b + c)`: the word embedding plus the position and type rows, or
    /// a projection plus its bias and the residual.
    fn add2_layer_norm_row => add2_layer_norm_row_impl(
        row: &mut [f32],
        b: &[f32],
        c: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
    )
}

#[inline(always)]
fn softmax_rows_impl<I: Isa>(scores: &mut [f32], n: usize) {
    for row in scores.chunks_exact_mut(n) {
        let max = max_lanes(row);
        for v in row.iter_mut() {
            *v = exp_fast::<I>(*v - max);
        }
        let inv = 1.0 / sum_lanes(row);
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

#[inline(always)]
fn bias_act_row_impl<I: Isa>(row: &mut [f32], bias: &[f32], act: Act) {
    let rows = row.iter_mut().zip(bias);
    // One loop per activation, so each is a straight vectorisable loop.
    match act {
        Act::GeluErf => rows.for_each(|(o, b)| {
            let x = *o + b;
            *o = 0.5 * x * (1.0 + erf_fast::<I>(x * std::f32::consts::FRAC_1_SQRT_2));
        }),
        Act::GeluTanh => rows.for_each(|(o, b)| {
            let x = *o + b;
            let u = 0.797_884_6 * I::madd(0.044_715 * x, x * x, x);
            // tanh(u) = 1 - 2 / (exp(2u) + 1)
            *o = 0.5 * x * (2.0 - 2.0 / (exp_fast::<I>(2.0 * u) + 1.0));
        }),
        Act::Relu => rows.for_each(|(o, b)| *o = (*o + b).max(0.0)),
    }
}

#[inline(always)]
fn add2_layer_norm_row_impl<I: Isa>(
    dst: &mut [f32],
    b: &[f32],
    c: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    for ((o, b), c) in dst.iter_mut().zip(b).zip(c) {
        *o += b + c;
    }
    let n = dst.len() as f32;
    let mean = sum_lanes(dst) / n;
    let var = sum_sq_dev_lanes(dst, mean) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in dst.iter_mut().zip(gamma).zip(beta) {
        *v = I::madd((*v - mean) * inv, *g, *b);
    }
}

#[inline(always)]
fn max_lanes(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            // Not f32::max: its NaN rule costs a compare and blend per element.
            *a = if v > *a { v } else { *a };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in acc.iter().chain(chunks.remainder()) {
        max = if v > max { v } else { max };
    }
    max
}

#[inline(always)]
fn sum_lanes(xs: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().chain(chunks.remainder()).sum()
}

/// Σ (x - mean)².
#[inline(always)]
fn sum_sq_dev_lanes(xs: &[f32], mean: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += (v - mean) * (v - mean);
        }
    }
    acc.iter()
        .copied()
        .chain(chunks.remainder().iter().map(|&v| (v - mean) * (v - mean)))
        .sum()
}

/// exp(x) with a Cephes-style polynomial; relative error ~2e-7.
#[inline(always)]
fn exp_fast<I: Isa>(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round x·log2(e) to the nearest integer n with the 1.5·2^23 trick: adding it leaves n
    // in the low mantissa bits, read as an integer below. (`fx as i32` would not vectorise:
    // Rust's saturating float-to-int cast is a compare and branch per lane.)
    let t = I::madd(x, std::f32::consts::LOG2_E, 12_582_912.0);
    let fx = t - 12_582_912.0;
    let n = t.to_bits().wrapping_sub(12_582_912f32.to_bits());
    let r = I::madd(fx, 2.121_944_4e-4, I::madd(fx, -0.693_359_4, x));
    let mut p = 1.987_569_1e-4f32;
    p = I::madd(p, r, 1.398_199_9e-3);
    p = I::madd(p, r, 8.333_452e-3);
    p = I::madd(p, r, 4.166_579_6e-2);
    p = I::madd(p, r, 1.666_666_5e-1);
    p = I::madd(p, r, 0.5);
    let y = I::madd(p, r * r, r + 1.0);
    // 2^n, built from its exponent bits; n is within [-126, 127] after the clamp.
    f32::from_bits(n.wrapping_add(127) << 23) * y
}

/// erf(x): rational approximation on [-4, 4] (the one Eigen and XLA use for f32).
#[inline(always)]
fn erf_fast<I: Isa>(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = I::madd(p, x2, 2.770_681_4e-8);
    p = I::madd(p, x2, -2.101_024e-6);
    p = I::madd(p, x2, -5.692_506_4e-5);
    p = I::madd(p, x2, -7.349_906_3e-4);
    p = I::madd(p, x2, -2.954_6e-3);
    p = I::madd(p, x2, -1.609_603_3e-2);
    let mut q = -1.456_607_2e-5f32;
    q = I::madd(q, x2, -2.133_740_6e-4);
    q = I::madd(q, x2, -1.682_827e-3);
    q = I::madd(q, x2, -7.373_329_2e-3);
    q = I::madd(q, x2, -1.426_474e-2);
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both builds of each kernel, so the baseline is tested on machines with AVX2 too.
    fn each_isa(check: impl Fn(&str, fn(f32) -> f32, fn(f32) -> f32)) {
        check("baseline", exp_fast::<Baseline>, erf_fast::<Baseline>);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("fma") {
            check("fma", exp_fast::<Avx2Fma>, erf_fast::<Avx2Fma>);
        }
    }

    #[test]
    fn exp_is_accurate() {
        each_isa(|isa, exp, _| {
            let mut worst = 0f32;
            let mut x = -80.0f32;
            while x <= 0.0 {
                let rel = ((exp(x) - x.exp()) / x.exp()).abs();
                worst = worst.max(rel);
                x += 0.013;
            }
            assert!(worst < 1e-6, "{isa}: exp relative error {worst}");
        });
    }

    #[test]
    fn erf_is_accurate() {
        each_isa(|isa, _, erf| {
            // erf values from a double-precision reference (Abramowitz & Stegun tables).
            for (x, want) in [
                (0.0f32, 0.0f64),
                (0.1, 0.112_462_916_018_284_9),
                (0.5, 0.520_499_877_813_046_5),
                (1.0, 0.842_700_792_949_714_9),
                (1.5, 0.966_105_146_475_310_7),
                (2.0, 0.995_322_265_018_952_7),
                (3.0, 0.999_977_909_503_001_4),
                (-1.0, -0.842_700_792_949_714_9),
                (6.0, 1.0),
            ] {
                let got = erf(x) as f64;
                assert!(
                    (got - want).abs() < 5e-7,
                    "{isa}: erf({x}) = {got}, want {want}"
                );
            }
        });
    }

    /// The lane-split reductions agree with a float64 sum on rows of every length around
    /// the lane count (remainders included).
    #[test]
    fn softmax_and_layer_norm_match_float64() {
        for n in [1usize, 7, 15, 16, 17, 33, 384, 511] {
            let xs: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let mut got = xs.clone();
            softmax_rows(&mut got, n);
            let max = xs
                .iter()
                .map(|&v| v as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = xs.iter().map(|&v| (v as f64 - max).exp()).sum();
            for (g, &x) in got.iter().zip(&xs) {
                let want = (x as f64 - max).exp() / total;
                assert!((*g as f64 - want).abs() < 1e-6, "softmax n={n}");
            }

            let (gamma, beta) = (vec![1.5f32; n], vec![0.25f32; n]);
            let zeros = vec![0f32; n];
            let mut out = xs.clone();
            add2_layer_norm_row(&mut out, &zeros, &xs, &gamma, &beta, 1e-12);
            let mean: f64 = xs.iter().map(|&v| 2.0 * v as f64).sum::<f64>() / n as f64;
            let var: f64 = xs
                .iter()
                .map(|&v| (2.0 * v as f64 - mean).powi(2))
                .sum::<f64>()
                / n as f64;
            for (o, &x) in out.iter().zip(&xs) {
                let want = if var == 0.0 {
                    0.25
                } else {
                    (2.0 * x as f64 - mean) / var.sqrt() * 1.5 + 0.25
                };
                assert!(
                    (*o as f64 - want).abs() < 1e-4,
                    "layer norm n={n}: {o} vs {want}"
                );
            }
        }
    }

    #[test]
    fn gelu_matches_its_definition() {
        let src: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) / 10.0).collect();
        let bias = vec![0.1f32; src.len()];
        let mut out = src.clone();
        bias_act_row(&mut out, &bias, Act::GeluErf);
        for (o, s) in out.iter().zip(&src) {
            let x = (s + 0.1) as f64;
            // erf from its series would be circular; compare GELU's tanh form, within its
            // own ~1e-3 approximation error.
            let tanh_form = 0.5
                * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh());
            assert!((*o as f64 - tanh_form).abs() < 2e-3, "gelu({x}) = {o}");
        }
        let mut out = src.clone();
        bias_act_row(&mut out, &bias, Act::Relu);
        assert!(out.iter().zip(&src).all(|(o, s)| *o == (s + 0.1).max(0.0)));
    }
}
