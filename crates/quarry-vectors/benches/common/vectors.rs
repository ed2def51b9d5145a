//! Vector-bench code shared by quarry-vectors' recall and quarry-store-pg's pgvector benches.

use std::collections::HashSet;
use std::hash::Hash;
use std::path::Path;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The seed of the synthetic vectors (results in bench/results/ were measured with it).
pub(crate) const SYNTHETIC_SEED: u64 = 0x5EED_0025;
/// Chunks per synthetic document.
pub(crate) const CHUNKS_PER_DOCUMENT: usize = 20;

/// splitmix64: a seeded, dependency-free generator (the data must be the same every run).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A standard normal (Box–Muller).
    pub(crate) fn normal(&mut self) -> f32 {
        let u = self.uniform().max(f64::MIN_POSITIVE);
        let v = self.uniform();
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    pub(crate) fn gaussian(&mut self, dims: usize, scale: f32) -> Vec<f32> {
        (0..dims).map(|_| self.normal() * scale).collect()
    }
}

pub(crate) fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let n = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// Synthetic embeddings with the structure of real ones: every vector leans on one shared
/// direction, topics of very unequal size, documents within a topic, chunks within a document.
pub(crate) struct Space {
    dims: usize,
    shared: Vec<f32>,
    topics: Vec<Vec<f32>>,
}

impl Space {
    /// The space of a corpus of `chunks` (a topic per 1,000, at least 20), drawn from `rng`.
    pub(crate) fn new(dims: usize, chunks: usize, rng: &mut Rng) -> Space {
        let unit = 1.0 / (dims as f32).sqrt();
        Space {
            dims,
            shared: normalised(rng.gaussian(dims, unit)),
            topics: (0..(chunks / 1000).max(20))
                .map(|_| rng.gaussian(dims, unit))
                .collect(),
        }
    }
    /// A document's centre: a topic (popular ones far more often) plus its own direction.
    pub(crate) fn document(&self, rng: &mut Rng) -> Vec<f32> {
        let t = ((self.topics.len() as f64) * rng.uniform().powi(3)) as usize;
        let unit = 0.7 / (self.dims as f32).sqrt();
        let topic = &self.topics[t.min(self.topics.len() - 1)];
        topic.iter().map(|x| x + rng.normal() * unit).collect()
    }
    /// One chunk of a document, as the model would embed it (normalised).
    pub(crate) fn chunk(&self, document: &[f32], rng: &mut Rng) -> Vec<f32> {
        let unit = 0.55 / (self.dims as f32).sqrt();
        normalised(
            document
                .iter()
                .zip(&self.shared)
                .map(|(d, s)| d + 0.45 * s + rng.normal() * unit)
                .collect(),
        )
    }
    /// The corpus: `n` chunks, a new document every [`CHUNKS_PER_DOCUMENT`].
    pub(crate) fn chunks<'a>(
        &'a self,
        n: usize,
        rng: &'a mut Rng,
    ) -> impl Iterator<Item = Vec<f32>> + 'a {
        let mut centre = Vec::new();
        (0..n).map(move |i| {
            if i % CHUNKS_PER_DOCUMENT == 0 {
                centre = self.document(rng);
            }
            self.chunk(&centre, rng)
        })
    }
    /// A query: a chunk of a document that was never stored.
    pub(crate) fn query(&self, rng: &mut Rng) -> Vec<f32> {
        let centre = self.document(rng);
        self.chunk(&centre, rng)
    }
}

/// A dataset of bench/vectors/make_dataset.py: `<name>.json` (count, queries, dims),
/// `<name>.f32` (`count` corpus vectors then `queries` held-out queries, little-endian f32) and
/// `<name>.docs` (the document of each corpus vector, little-endian u32).
pub(crate) struct Dataset {
    /// The `.json` file's name, for reports.
    pub(crate) name: String,
    pub(crate) count: usize,
    pub(crate) queries: usize,
    pub(crate) dims: usize,
    /// Corpus then queries, `dims` values each.
    pub(crate) values: Vec<f32>,
    pub(crate) documents: Vec<u32>,
}

impl Dataset {
    pub(crate) fn read(path: &str) -> std::io::Result<Dataset> {
        let meta = std::fs::read_to_string(path)?;
        let field = |k: &str| {
            json_number(&meta, k)
                .ok_or_else(|| std::io::Error::other(format!("{path}: no \"{k}\"")))
        };
        let (count, queries, dims) = (field("count")?, field("queries")?, field("dims")?);
        let base = Path::new(path);
        let bytes = std::fs::read(base.with_extension("f32"))?;
        let docs = std::fs::read(base.with_extension("docs"))?;
        if bytes.len() != (count + queries) * dims * 4 || docs.len() != count * 4 {
            return Err(std::io::Error::other(format!(
                "{path}: the .f32 or .docs file does not match"
            )));
        }
        let le = |b: &[u8]| [b[0], b[1], b[2], b[3]];
        Ok(Dataset {
            name: base
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            count,
            queries,
            dims,
            values: bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(le(b)))
                .collect(),
            documents: docs
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(le(b)))
                .collect(),
        })
    }
    pub(crate) fn vector(&self, i: usize) -> &[f32] {
        &self.values[i * self.dims..(i + 1) * self.dims]
    }
    pub(crate) fn query(&self, i: usize) -> &[f32] {
        self.vector(self.count + i)
    }
}

/// The whole number after `"key":` in a flat JSON object.
fn json_number(text: &str, key: &str) -> Option<usize> {
    let at = text.find(&format!("\"{key}\""))?;
    let rest = text[at + key.len() + 2..].trim_start().strip_prefix(':')?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// How many of the first `k` found are in `truth`.
pub(crate) fn overlap<T: Eq + Hash>(found: &[T], truth: &[T], k: usize) -> usize {
    let truth: HashSet<&T> = truth.iter().collect();
    found.iter().take(k).filter(|x| truth.contains(x)).count()
}

/// `clients` threads, each running `per_client` queries through `f` (given its client's
/// number): the latencies, sorted, and the wall time.
pub(crate) fn client_latencies(
    clients: usize,
    per_client: usize,
    queries: &[Vec<f32>],
    f: impl Fn(usize, &[f32]) -> Result<(), Error> + Sync,
) -> Result<(Vec<Duration>, Duration), Error> {
    let t = Instant::now();
    let mut all = std::thread::scope(|s| -> Result<Vec<Duration>, Error> {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let f = &f;
                s.spawn(move || -> Result<Vec<Duration>, Error> {
                    (0..per_client)
                        .map(|i| {
                            let query = &queries[(c * 7919 + i) % queries.len()];
                            let t = Instant::now();
                            f(c, query)?;
                            Ok(t.elapsed())
                        })
                        .collect()
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| "a client thread panicked")??);
        }
        Ok(all)
    })?;
    let wall = t.elapsed();
    all.sort();
    Ok((all, wall))
}
