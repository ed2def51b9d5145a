//! Which SIMD kernels the fused encoder's matrix products run on.
//!
//! Release builds target the x86-64 baseline so that one binary runs everywhere; the wide
//! kernels are chosen at run time. The choice is made once per layer, when its weights are
//! packed ([`crate::fused`] at load): the int8 weights' range depends on it (7 bits for
//! `vpmaddubsw`, whose i16 pair sums would otherwise saturate; 8 bits for `vpdpbusd`), so the
//! kernel that runs must be the one the weights were quantised for.
//!
//! A [`KernelPath`] is a ceiling: each kind of product takes the best kernel at or below it
//! that the CPU has. [`KernelPath::detect`] is this CPU's best; [`with_kernel_path`] lowers
//! it for the models loaded inside a closure, so that tests and benchmarks can run every
//! path this CPU supports side by side.

use std::cell::Cell;
use std::sync::OnceLock;

/// A ceiling on the SIMD kernels of the fused encoder's matrix products (ordered: each
/// includes the ones before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelPath {
    /// int8 in plain Rust; fp32 through the `gemm` crate (which picks its own SIMD).
    Portable,
    /// int8 with AVX2 `vpmaddubsw` + `vpmaddwd` (7-bit weights); fp32 through `gemm`.
    Avx2,
    /// int8 with AVX-VNNI's 256-bit `vpdpbusd` (8-bit weights); fp32 through `gemm`.
    AvxVnni,
    /// fp32 with this crate's AVX-512F kernel; int8 with AVX512-VNNI's 512-bit `vpdpbusd`.
    Avx512,
}

/// The int8 kernel a layer runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Int8Kernel {
    Portable,
    Avx2,
    AvxVnni,
    Avx512Vnni,
}

/// The fp32 kernel a layer runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum F32Kernel {
    /// The `gemm` crate (candle's matrix product).
    Gemm,
    Avx512,
}

/// What this CPU has, tested once.
#[derive(Debug, Clone, Copy, Default)]
struct Features {
    avx2_fma: bool,
    avx_vnni: bool,
    avx512: bool,
    avx512_vnni: bool,
}

fn features() -> Features {
    static CPU: OnceLock<Features> = OnceLock::new();
    *CPU.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2_fma = has!("avx2") && has!("fma");
            let avx512 = avx2_fma && has!("avx512f");
            Features {
                avx2_fma,
                avx_vnni: avx2_fma && has!("avxvnni"),
                avx512,
                avx512_vnni: avx512 && has!("avx512bw") && has!("avx512vnni"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features::default()
        }
    })
}

thread_local! {
    /// The ceiling [`with_kernel_path`] set on this thread, if any.
    static FORCED: Cell<Option<KernelPath>> = const { Cell::new(None) };
}

/// Runs `f` with the kernels of models loaded on this thread inside it capped at `path`
/// (never above what the CPU has). For tests and benchmarks: a model keeps the kernels it
/// was loaded with.
pub fn with_kernel_path<R>(path: KernelPath, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<KernelPath>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FORCED.with(|c| c.replace(Some(path))));
    f()
}

impl KernelPath {
    /// Every path, lowest first.
    pub const ALL: [KernelPath; 4] = [
        KernelPath::Portable,
        KernelPath::Avx2,
        KernelPath::AvxVnni,
        KernelPath::Avx512,
    ];

    /// The best path this CPU has (tested once per process).
    pub fn detect() -> KernelPath {
        let f = features();
        if f.avx512 {
            KernelPath::Avx512
        } else if f.avx_vnni {
            KernelPath::AvxVnni
        } else if f.avx2_fma {
            KernelPath::Avx2
        } else {
            KernelPath::Portable
        }
    }

    /// The ceiling for models loaded now: [`with_kernel_path`]'s on this thread, else
    /// [`KernelPath::detect`].
    pub fn current() -> KernelPath {
        FORCED.with(Cell::get).unwrap_or_else(KernelPath::detect)
    }

    /// Whether this CPU runs this path's own int8 kernel (not a lower one in its place).
    pub fn int8_native(self) -> bool {
        self.int8_kernel()
            == match self {
                KernelPath::Portable => Int8Kernel::Portable,
                KernelPath::Avx2 => Int8Kernel::Avx2,
                KernelPath::AvxVnni => Int8Kernel::AvxVnni,
                KernelPath::Avx512 => Int8Kernel::Avx512Vnni,
            }
    }

    /// Whether this CPU runs this path's own fp32 kernel.
    pub fn f32_native(self) -> bool {
        self != KernelPath::Avx512 || self.f32_kernel() == F32Kernel::Avx512
    }

    /// The int8 kernel taken under this ceiling, for reports.
    pub fn int8_name(self) -> &'static str {
        match self.int8_kernel() {
            Int8Kernel::Portable => "int8 portable (plain Rust)",
            Int8Kernel::Avx2 => "int8 AVX2 (vpmaddubsw, 7-bit weights)",
            Int8Kernel::AvxVnni => "int8 AVX-VNNI (256-bit vpdpbusd)",
            Int8Kernel::Avx512Vnni => "int8 AVX512-VNNI (512-bit vpdpbusd)",
        }
    }

    /// The fp32 kernel taken under this ceiling, for reports.
    pub fn f32_name(self) -> &'static str {
        match self.f32_kernel() {
            F32Kernel::Gemm => "fp32 gemm crate (AVX2/FMA where present)",
            F32Kernel::Avx512 => "fp32 AVX-512F (sgemm.rs)",
        }
    }

    pub(crate) fn int8_kernel(self) -> Int8Kernel {
        let f = features();
        if self >= KernelPath::Avx512 && f.avx512_vnni {
            Int8Kernel::Avx512Vnni
        } else if self >= KernelPath::AvxVnni && f.avx_vnni {
            Int8Kernel::AvxVnni
        } else if self >= KernelPath::Avx2 && f.avx2_fma {
            Int8Kernel::Avx2
        } else {
            Int8Kernel::Portable
        }
    }

    pub(crate) fn f32_kernel(self) -> F32Kernel {
        if self >= KernelPath::Avx512 && features().avx512 {
            F32Kernel::Avx512
        } else {
            F32Kernel::Gemm
        }
    }
}
