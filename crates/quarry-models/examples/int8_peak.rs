//! Would int8 weights make the encoder faster on this CPU? Measures one core's peak
//! multiply-accumulate rate for fp32 (AVX2 FMA, what the fused encoder's matrix products run
//! on) and for int8 (`vpmaddubsw` + `vpmaddwd` + `vpaddd`, the AVX2 int8 dot product that
//! quantised GEMMs without AVX-VNNI use), with the operands in registers: an upper bound
//! for any kernel of either kind.
//!
//! ```sh
//! cargo run --release -p quarry-models --example int8_peak
//! ```
//!
//! The ratio bounds what quantised matrix products can gain over fp32 here; packing,
//! quantising activations and the wider epilogue only lower it.
//!
//! Where the CPU has them, the 512-bit forms the encoder's AVX-512 paths run are measured too:
//! fp32 FMA on zmm and AVX512-VNNI `vpdpbusd` on zmm (64 u8 × i8 products summed into 16
//! i32 lanes per instruction), and AVX-VNNI's 256-bit `vpdpbusd`.

use std::time::Instant;

/// Independent accumulator chains: enough to hide either instruction's latency.
const CHAINS: usize = 12;

fn main() {
    #[cfg(target_arch = "x86_64")]
    {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            println!("this CPU has no AVX2 + FMA: nothing to compare");
            return;
        }
        let iters = 40_000_000u64;
        let mut best = (0f64, 0f64, 0f64);
        for _ in 0..3 {
            // SAFETY: AVX2 and FMA were detected above.
            let (fp32, int8, int16) = unsafe {
                (
                    x86::fp32_gmacs(iters),
                    x86::int8_gmacs(iters),
                    x86::int16_gmacs(iters),
                )
            };
            best = (best.0.max(fp32), best.1.max(int8), best.2.max(int16));
        }
        println!("fp32 FMA           {:7.1} GMAC/s per core", best.0);
        println!("int8 maddubs+madd  {:7.1} GMAC/s per core", best.1);
        println!("int8 / fp32        {:7.2}x", best.1 / best.0);
        println!("i16 madd           {:7.1} GMAC/s per core", best.2);
        println!("i16 / fp32         {:7.2}x", best.2 / best.0);
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F detected.
            let zmm = (0..3).map(|_| unsafe { x86::fp32_zmm_gmacs(iters) });
            let zmm = zmm.fold(0f64, f64::max);
            println!("fp32 FMA zmm       {zmm:7.1} GMAC/s per core");
            if is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512bw") {
                // SAFETY: AVX512-VNNI and BW detected.
                let vnni = (0..3).map(|_| unsafe { x86::vnni_zmm_gmacs(iters) });
                let vnni = vnni.fold(0f64, f64::max);
                println!("int8 vpdpbusd zmm  {vnni:7.1} GMAC/s per core");
                println!("vnni zmm / fp32 zmm{:7.2}x", vnni / zmm);
            }
        }
        if is_x86_feature_detected!("avxvnni") {
            // SAFETY: AVX-VNNI detected.
            let vnni = (0..3).map(|_| unsafe { x86::vnni_ymm_gmacs(iters) });
            let vnni = vnni.fold(0f64, f64::max);
            println!("int8 vpdpbusd ymm  {vnni:7.1} GMAC/s per core");
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("x86-64 only");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHAINS, Instant};
    use std::arch::x86_64::*;

    /// fp32: `CHAINS` FMAs of 8 lanes per iteration.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fp32_gmacs(iters: u64) -> f64 {
        let a = _mm256_set1_ps(1.000_01);
        // A weight per chain (read from L1 as a GEMM reads its packed panel).
        let w: [__m256; CHAINS] = std::array::from_fn(|i| _mm256_set1_ps(0.999 + i as f32 * 1e-4));
        let mut acc = [_mm256_setzero_ps(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                acc[j] = _mm256_fmadd_ps(a, w[j], acc[j]);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        let mut sum = _mm256_setzero_ps();
        for v in acc {
            sum = _mm256_add_ps(sum, v);
        }
        std::hint::black_box(sum);
        (iters * CHAINS as u64 * 8) as f64 / secs / 1e9
    }

    /// int8: `CHAINS` × (u8·i8 pairs → i16, pairs of i16 → i32, add) of 32 products each.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn int8_gmacs(iters: u64) -> f64 {
        let mut a = _mm256_set1_epi8(3);
        let ones = _mm256_set1_epi16(1);
        let w: [__m256i; CHAINS] = std::array::from_fn(|i| _mm256_set1_epi8(i as i8 + 1));
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, w[j]), ones);
                acc[j] = _mm256_add_epi32(acc[j], p);
            }
            // A new activation each round, so the products cannot be hoisted.
            a = _mm256_xor_si256(a, ones);
        }
        let secs = t.elapsed().as_secs_f64();
        let mut sum = _mm256_setzero_si256();
        for v in acc {
            sum = _mm256_add_epi32(sum, v);
        }
        std::hint::black_box(sum);
        (iters * CHAINS as u64 * 32) as f64 / secs / 1e9
    }

    /// fp32 on zmm: `CHAINS` FMAs of 16 lanes per iteration.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fp32_zmm_gmacs(iters: u64) -> f64 {
        let a = _mm512_set1_ps(1.000_01);
        let w: [__m512; CHAINS] = std::array::from_fn(|i| _mm512_set1_ps(0.999 + i as f32 * 1e-4));
        let mut acc = [_mm512_setzero_ps(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                acc[j] = _mm512_fmadd_ps(a, w[j], acc[j]);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(acc);
        (iters * CHAINS as u64 * 16) as f64 / secs / 1e9
    }

    /// AVX512-VNNI: `CHAINS` `vpdpbusd` of 64 products each.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn vnni_zmm_gmacs(iters: u64) -> f64 {
        let mut a = _mm512_set1_epi8(3);
        let one = _mm512_set1_epi8(1);
        let w: [__m512i; CHAINS] = std::array::from_fn(|i| _mm512_set1_epi8(i as i8 + 1));
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                acc[j] = _mm512_dpbusd_epi32(acc[j], a, w[j]);
            }
            a = _mm512_xor_si512(a, one);
        }
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(acc);
        (iters * CHAINS as u64 * 64) as f64 / secs / 1e9
    }

    /// AVX-VNNI: `CHAINS` 256-bit `vpdpbusd` of 32 products each.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn vnni_ymm_gmacs(iters: u64) -> f64 {
        let mut a = _mm256_set1_epi8(3);
        let one = _mm256_set1_epi8(1);
        let w: [__m256i; CHAINS] = std::array::from_fn(|i| _mm256_set1_epi8(i as i8 + 1));
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                acc[j] = _mm256_dpbusd_avx_epi32(acc[j], a, w[j]);
            }
            a = _mm256_xor_si256(a, one);
        }
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(acc);
        (iters * CHAINS as u64 * 32) as f64 / secs / 1e9
    }

    /// int8 values widened to i16: `CHAINS` × (pairs of i16 → i32, add) of 16 products
    /// each. No saturation, so both operands keep all 8 bits.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn int16_gmacs(iters: u64) -> f64 {
        let mut a = _mm256_set1_epi16(3);
        let ones = _mm256_set1_epi16(1);
        let w: [__m256i; CHAINS] = std::array::from_fn(|i| _mm256_set1_epi16(i as i16 + 1));
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        let t = Instant::now();
        for _ in 0..iters {
            for j in 0..CHAINS {
                acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(a, w[j]));
            }
            a = _mm256_xor_si256(a, ones);
        }
        let secs = t.elapsed().as_secs_f64();
        let mut sum = _mm256_setzero_si256();
        for v in acc {
            sum = _mm256_add_epi32(sum, v);
        }
        std::hint::black_box(sum);
        (iters * CHAINS as u64 * 16) as f64 / secs / 1e9
    }
}
