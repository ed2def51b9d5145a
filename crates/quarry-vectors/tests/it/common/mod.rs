//! Shared helpers for the integration tests: a tiny seeded RNG and random unit vectors.
#![allow(dead_code)]

/// xorshift64* — tiny, seeded, good enough for test data.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // Avoid the all-zero state, which xorshift never leaves.
        XorShift(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal via Box–Muller (isotropic directions after normalising).
    pub(crate) fn next_gaussian(&mut self) -> f32 {
        let u1 = self.next_f32().max(f32::MIN_POSITIVE);
        let u2 = self.next_f32();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }
}

pub(crate) fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub(crate) fn random_unit(rng: &mut XorShift, dims: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dims).map(|_| rng.next_gaussian()).collect();
    normalize(&mut v);
    v
}

/// `n` random unit vectors in one flat buffer (row-major).
pub(crate) fn random_unit_matrix(seed: u64, n: usize, dims: usize) -> Vec<f32> {
    let mut rng = XorShift::new(seed);
    let mut out = Vec::with_capacity(n * dims);
    for _ in 0..n {
        out.extend(random_unit(&mut rng, dims));
    }
    out
}

/// Fraction of `truth` keys present in `found`.
pub(crate) fn recall(found: &[(u64, f32)], truth: &[(u64, f32)]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    let hits = truth
        .iter()
        .filter(|(k, _)| found.iter().any(|(f, _)| f == k))
        .count();
    hits as f64 / truth.len() as f64
}

/// Embedding-like random data: unit vectors with low intrinsic dimension.
///
/// Real sentence embeddings occupy a low-dimensional, clustered region of their 384-d space;
/// isotropic random vectors do not (every point is almost equidistant from every other), which
/// is a worst case no graph index handles at low `ef`. This model draws a latent
/// `z ~ N(0, I_latent)`, maps it through a fixed random `dims × latent` Gaussian matrix, adds
/// isotropic noise of relative scale `noise`, and normalises.
pub(crate) struct LatentModel {
    dims: usize,
    latent: usize,
    noise: f32,
    projection: Vec<f32>, // dims × latent, row-major
}

impl LatentModel {
    pub(crate) fn new(seed: u64, dims: usize, latent: usize, noise: f32) -> Self {
        let mut rng = XorShift::new(seed);
        let projection = (0..dims * latent)
            .map(|_| rng.next_gaussian() / (latent as f32).sqrt())
            .collect();
        LatentModel {
            dims,
            latent,
            noise,
            projection,
        }
    }

    pub(crate) fn sample(&self, rng: &mut XorShift) -> Vec<f32> {
        let z: Vec<f32> = (0..self.latent).map(|_| rng.next_gaussian()).collect();
        let mut v: Vec<f32> = self
            .projection
            .chunks_exact(self.latent)
            .map(|row| row.iter().zip(&z).map(|(a, b)| a * b).sum::<f32>())
            .collect();
        for x in v.iter_mut() {
            *x += self.noise * rng.next_gaussian();
        }
        debug_assert_eq!(v.len(), self.dims);
        normalize(&mut v);
        v
    }

    pub(crate) fn matrix(&self, seed: u64, n: usize) -> Vec<f32> {
        let mut rng = XorShift::new(seed);
        let mut out = Vec::with_capacity(n * self.dims);
        for _ in 0..n {
            out.extend(self.sample(&mut rng));
        }
        out
    }
}
