//! A fused CPU forward pass for post-LN BERT / XLM-R encoders.
//!
//! Same weights and the same arithmetic as `candle_transformers::models::{bert, xlm_roberta}`,
//! but the element-wise work around the matrix products is fused into single passes:
//!
//! * embeddings: gather word + position + token-type rows and LayerNorm in one pass;
//! * Q, K and V come from one matrix product against the concatenated `[3H, H]` weight;
//! * batches are packed: sequences one after another with no padding, so every matrix
//!   product and element-wise pass works on real tokens only, whatever the mix of lengths;
//! * attention runs per sequence and head: the bias and `1/sqrt(d)` applied while gathering
//!   that head's Q, K, V, then `QKᵀ`, softmax and `·V` in a per-worker scratch (no
//!   `[b, heads, len, len]` score tensor, no mask);
//! * `bias + GELU` and `bias + residual + LayerNorm` are single passes.
//!
//! The large matrix products are, on a CPU with AVX-512F, this crate's packed AVX-512 kernel
//! ([`crate::sgemm`]; the `gemm` crate is built without its AVX-512 kernels), else candle's
//! (gemm, multi-threaded); int8 ones [`crate::qgemm`]'s. The kernel path is chosen once, at
//! load ([`crate::cpu`]). The per-head attention products call `gemm` single-threaded, one
//! task per sequence and head. The element-wise kernels ([`crate::kernels`]) run in parallel over rows with rayon, vectorised,
//! with AVX2 + FMA where the CPU has them. With candle's own ops these steps took ~40 % of the
//! forward pass on MiniLM.

use candle_core::{
    CpuStorage, CustomOp1, InplaceOp1, InplaceOp2, Layout, Result, Shape, Tensor, bail,
};
use candle_nn::VarBuilder;
use rayon::prelude::*;

use crate::cpu::{F32Kernel, KernelPath};
use crate::kernels::{self, Act};
use crate::qgemm::QuantLinear;
use crate::sgemm::PackedF32;

pub(crate) struct FusedConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub max_positions: usize,
    pub type_vocab_size: usize,
    pub eps: f64,
    pub act: Act,
    /// `Some(pad_id)` for XLM-R position numbering (`pad + 1 + i`), `None` for BERT (`i`).
    pub xlmr_pad: Option<u32>,
    /// Quantise the layers' weights to int8 at load ([`crate::qgemm`]).
    pub int8: bool,
}

/// A layer's weight: fp32 (transposed for candle's matrix product, or packed for this
/// crate's AVX-512 kernel) or int8.
enum Linear {
    F32(Tensor),
    F32Packed(PackedF32),
    Int8(QuantLinear),
}

impl Linear {
    /// From PyTorch's `[out, in]` weight.
    fn new(w: Tensor, int8: bool, path: KernelPath) -> Result<Linear> {
        let (n, k) = w.dims2()?;
        if !int8 {
            return Ok(match path.f32_kernel() {
                F32Kernel::Gemm => Linear::F32(w.t()?),
                F32Kernel::Avx512 => Linear::F32Packed(PackedF32::new(
                    &w.flatten_all()?.to_vec1::<f32>()?,
                    n,
                    k,
                    true,
                )),
            });
        }
        Ok(Linear::Int8(QuantLinear::new(
            &w.flatten_all()?.to_vec1::<f32>()?,
            n,
            k,
            path.int8_kernel(),
        )))
    }

    /// `x · wᵀ` (no bias), a fresh tensor.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Linear::F32(wt) => x.matmul(wt),
            Linear::F32Packed(p) => x.apply_op1_no_bwd(&PackedMatmul(p)),
            Linear::Int8(q) => x.apply_op1_no_bwd(&QuantMatmul(q)),
        }
    }
}

struct Layer {
    wqkv: Linear,
    bqkv: Vec<f32>,
    wo: Linear,
    bo: Vec<f32>,
    ln1: (Vec<f32>, Vec<f32>),
    wi: Linear,
    bi: Vec<f32>,
    wo2: Linear,
    bo2: Vec<f32>,
    ln2: (Vec<f32>, Vec<f32>),
}

pub(crate) struct FusedEncoder {
    cfg: FusedConfig,
    word: Tensor,
    pos: Vec<f32>,
    types: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

fn vec1(vb: &VarBuilder, n: usize, name: &str) -> Result<Vec<f32>> {
    vb.get(n, name)?.to_vec1::<f32>()
}

fn ln(vb: &VarBuilder, h: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok((vec1(vb, h, "weight")?, vec1(vb, h, "bias")?))
}

impl FusedEncoder {
    /// Loads from a VarBuilder rooted at the encoder (`embeddings.*`, `encoder.layer.*`).
    /// The kernels are chosen here, once ([`KernelPath::current`]): int8 weights are
    /// quantised for the kernel that will run them.
    pub(crate) fn load(vb: &VarBuilder, cfg: FusedConfig) -> Result<Self> {
        let (h, f) = (cfg.hidden_size, cfg.intermediate_size);
        let path = KernelPath::current();
        let e = vb.pp("embeddings");
        let word = e.get((cfg.vocab_size, h), "word_embeddings.weight")?;
        let pos = e
            .get((cfg.max_positions, h), "position_embeddings.weight")?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let types = e
            .get((cfg.type_vocab_size, h), "token_type_embeddings.weight")?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let emb_ln = ln(&e.pp("LayerNorm"), h)?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let s = a.pp("self");
            let wq = s.get((h, h), "query.weight")?;
            let wk = s.get((h, h), "key.weight")?;
            let wv = s.get((h, h), "value.weight")?;
            let wqkv = Tensor::cat(&[&wq, &wk, &wv], 0)?;
            let mut bqkv = vec1(&s, h, "query.bias")?;
            bqkv.extend(vec1(&s, h, "key.bias")?);
            bqkv.extend(vec1(&s, h, "value.bias")?);
            let o = a.pp("output");
            let linear = |w: Tensor| Linear::new(w, cfg.int8, path);
            layers.push(Layer {
                wqkv: linear(wqkv)?,
                bqkv,
                wo: linear(o.get((h, h), "dense.weight")?)?,
                bo: vec1(&o, h, "dense.bias")?,
                ln1: ln(&o.pp("LayerNorm"), h)?,
                wi: linear(l.get((f, h), "intermediate.dense.weight")?)?,
                bi: vec1(&l, f, "intermediate.dense.bias")?,
                wo2: linear(l.get((h, f), "output.dense.weight")?)?,
                bo2: vec1(&l, h, "output.dense.bias")?,
                ln2: ln(&l.pp("output.LayerNorm"), h)?,
            });
        }
        Ok(FusedEncoder {
            cfg,
            word,
            pos,
            types,
            emb_ln,
            layers,
        })
    }

    /// Whether the layers run on int8 weights.
    pub(crate) fn int8(&self) -> bool {
        self.cfg.int8
    }

    /// `ids`, `type_ids`: the batch's sequences packed one after another, no padding;
    /// `lens[i]` tokens in sequence i (they sum to `ids.len()`). Returns the last hidden state
    /// `[Σ lens, H]`, packed the same way: a short sequence batched with a long one costs
    /// only its own tokens.
    pub(crate) fn forward(&self, ids: &[u32], type_ids: &[u32], lens: &[usize]) -> Result<Tensor> {
        let cfg = &self.cfg;
        let m: usize = lens.iter().sum();
        let h = cfg.hidden_size;
        if ids.len() != m || type_ids.len() != m {
            bail!("fused encoder: expected {m} ids, got {}", ids.len());
        }
        if lens.contains(&0) {
            bail!("fused encoder: empty sequence");
        }
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= cfg.vocab_size) {
            bail!(
                "token id {bad} is outside the vocabulary ({})",
                cfg.vocab_size
            );
        }
        if let Some(bad) = type_ids
            .iter()
            .find(|&&t| t as usize >= cfg.type_vocab_size)
        {
            bail!(
                "token type {bad} is outside type_vocab_size ({})",
                cfg.type_vocab_size
            );
        }
        let starts: Vec<usize> = lens
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect();
        // Position ids: BERT counts from 0; XLM-R (HF create_position_ids_from_input_ids)
        // numbers non-pad tokens pad+1, pad+2, … and gives pad tokens the pad position.
        let mut pos_ids = vec![0u32; m];
        for (&start, &n) in starts.iter().zip(lens) {
            let r = &ids[start..start + n];
            let p = &mut pos_ids[start..start + n];
            match cfg.xlmr_pad {
                None => p.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32),
                Some(pad) => {
                    let mut count = 0u32;
                    for (x, &id) in p.iter_mut().zip(r) {
                        if id != pad {
                            count += 1;
                            *x = pad + count;
                        } else {
                            *x = pad;
                        }
                    }
                }
            }
        }
        if let Some(bad) = pos_ids.iter().find(|&&p| p as usize >= cfg.max_positions) {
            bail!(
                "position {bad} is outside max_position_embeddings ({})",
                cfg.max_positions
            );
        }
        let eps = cfg.eps as f32;
        let mut x = self.word.apply_op1_no_bwd(&EmbedLn {
            ids,
            pos_ids: &pos_ids,
            type_ids,
            pos: &self.pos,
            types: &self.types,
            gamma: &self.emb_ln.0,
            beta: &self.emb_ln.1,
            eps,
            h,
        })?;
        // The matrix products' outputs are fresh tensors, so the element-wise steps after
        // them write in place (no second buffer of each size per layer).
        for layer in &self.layers {
            let ctx = layer.wqkv.forward(&x)?.apply_op1_no_bwd(&Attention {
                bias: &layer.bqkv,
                starts: &starts,
                lens,
                heads: cfg.num_heads,
            })?;
            let attn = layer.wo.forward(&ctx)?;
            attn.inplace_op2(
                &x,
                &BiasResidualLn {
                    bias: &layer.bo,
                    gamma: &layer.ln1.0,
                    beta: &layer.ln1.1,
                    eps,
                },
            )?;
            x = attn;
            let inter = layer.wi.forward(&x)?;
            inter.inplace_op1(&BiasAct {
                bias: &layer.bi,
                act: cfg.act,
            })?;
            let out = layer.wo2.forward(&inter)?;
            out.inplace_op2(
                &x,
                &BiasResidualLn {
                    bias: &layer.bo2,
                    gamma: &layer.ln2.0,
                    beta: &layer.ln2.1,
                    eps,
                },
            )?;
            x = out;
        }
        debug_assert_eq!(x.dims(), [m, h]);
        Ok(x)
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

fn contiguous_f32_mut<'a>(s: &'a mut CpuStorage, l: &Layout) -> Result<&'a mut [f32]> {
    let (a, b) = match l.contiguous_offsets() {
        Some(range) => range,
        None => bail!("fused kernel needs a contiguous f32 output"),
    };
    match s {
        CpuStorage::F32(data) => Ok(&mut data[a..b]),
        _ => bail!("fused kernel needs f32 tensors"),
    }
}

fn contiguous_f32<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    let data = s.as_slice::<f32>()?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => bail!("fused kernel needs a contiguous f32 input"),
    }
}

/// `x · wᵀ` on int8 weights: `x` `[m, k]` → `[m, n]`.
struct QuantMatmul<'a>(&'a QuantLinear);

impl CustomOp1 for QuantMatmul<'_> {
    fn name(&self) -> &'static str {
        "quarry-int8-matmul"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s, l)?;
        let (m, k) = l.shape().dims2()?;
        if k != self.0.in_features() {
            bail!(
                "int8 matmul: {k} inputs for a {}-input layer",
                self.0.in_features()
            );
        }
        let y = self.0.forward(x);
        Ok((CpuStorage::F32(y), Shape::from((m, self.0.out_features()))))
    }
}

/// `x · wᵀ` on packed fp32 weights (AVX-512): `x` `[m, k]` → `[m, n]`.
struct PackedMatmul<'a>(&'a PackedF32);

impl CustomOp1 for PackedMatmul<'_> {
    fn name(&self) -> &'static str {
        "quarry-f32-matmul"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s, l)?;
        let (m, k) = l.shape().dims2()?;
        if k != self.0.in_features() {
            bail!(
                "fp32 matmul: {k} inputs for a {}-input layer",
                self.0.in_features()
            );
        }
        let y = self.0.forward(x);
        Ok((CpuStorage::F32(y), Shape::from((m, self.0.out_features()))))
    }
}

/// Minimum rows per rayon task, so tiny batches are not split into useless tasks.
fn min_rows(row_len: usize) -> usize {
    (16_384 / row_len.max(1)).max(1)
}

struct EmbedLn<'a> {
    ids: &'a [u32],
    pos_ids: &'a [u32],
    type_ids: &'a [u32],
    pos: &'a [f32],
    types: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
    h: usize,
}

impl CustomOp1 for EmbedLn<'_> {
    fn name(&self) -> &'static str {
        "quarry-embed-layernorm"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let table = contiguous_f32(s, l)?;
        let h = self.h;
        let m = self.ids.len();
        let mut out = vec![0f32; m * h];
        out.par_chunks_mut(h)
            .with_min_len(min_rows(h))
            .enumerate()
            .for_each(|(t, row)| {
                let w = &table[self.ids[t] as usize * h..][..h];
                let p = &self.pos[self.pos_ids[t] as usize * h..][..h];
                let ty = &self.types[self.type_ids[t] as usize * h..][..h];
                row.copy_from_slice(w);
                kernels::add2_layer_norm_row(row, p, ty, self.gamma, self.beta, self.eps);
            });
        Ok((CpuStorage::F32(out), Shape::from((m, h))))
    }
}

/// Multi-head self-attention from the fused Q, K, V projection `[tokens, 3H]` of a packed
/// batch (its bias not yet added) to the heads' context `[tokens, H]`.
///
/// One task per sequence and head gathers that head's Q (bias added, scaled by `1/sqrt(d)`),
/// K and V for the sequence's tokens, then runs `QKᵀ`, the softmax and `·V` in a per-worker
/// scratch. The scores never exist as a `[b, heads, len, len]` tensor (at 512 tokens that was
/// 400 MB for a full batch), there is no mask (a packed batch has no padding), and each small
/// product is one single-threaded `gemm` call instead of a multi-threaded call per head
/// (whose dispatch cost exceeded the work at these sizes).
struct Attention<'a> {
    bias: &'a [f32],
    /// First token of each sequence.
    starts: &'a [usize],
    /// Tokens of each sequence.
    lens: &'a [usize],
    heads: usize,
}

/// `dst = lhs · rhs` for `(m, n, k)` = (rows, columns, inner size), on this thread; each
/// matrix is its first element with its (row stride, column stride) in elements.
///
/// # Safety
/// Each pointer must address a live buffer covering every element its shape and strides
/// reach, and nothing else may access `dst`'s elements meanwhile.
unsafe fn small_matmul(
    (m, n, k): (usize, usize, usize),
    dst: (*mut f32, usize, usize),
    lhs: (*const f32, usize, usize),
    rhs: (*const f32, usize, usize),
) {
    // SAFETY: the caller's contract is gemm's.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.0,
            dst.2 as isize,
            dst.1 as isize,
            false,
            lhs.0,
            lhs.2 as isize,
            lhs.1 as isize,
            rhs.0,
            rhs.2 as isize,
            rhs.1 as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// One worker's buffers for [`Attention`], reused across its tasks.
#[derive(Default)]
struct AttentionScratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    scores: Vec<f32>,
}

/// The attention output, written by several tasks at once: each writes only its own
/// sequence's rows and its own head's columns, so no two tasks touch the same element.
#[derive(Clone, Copy)]
struct DisjointOut(*mut f32);
// SAFETY: see the type's documentation; the buffer outlives the parallel loop.
unsafe impl Send for DisjointOut {}
// SAFETY: as above.
unsafe impl Sync for DisjointOut {}

impl DisjointOut {
    /// The element at `offset` (a method, so closures capture the whole wrapper).
    fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

impl CustomOp1 for Attention<'_> {
    fn name(&self) -> &'static str {
        "quarry-attention"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s, l)?;
        let (_, three_h) = l.shape().dims2()?;
        let heads = self.heads;
        let h = three_h / 3;
        let d = h / heads;
        let m: usize = self.lens.iter().sum();
        if three_h != 3 * h || d * heads != h || x.len() != m * 3 * h || self.bias.len() != 3 * h {
            bail!(
                "attention: expected [{m}, {}] input, got {:?}",
                3 * h,
                l.shape()
            );
        }
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = vec![0f32; m * h];
        let dst = DisjointOut(out.as_mut_ptr());
        (0..self.lens.len() * heads).into_par_iter().for_each_init(
            AttentionScratch::default,
            |sc, task| {
                let (seq, head) = (task / heads, task % heads);
                let (start, n) = (self.starts[seq], self.lens[seq]);
                let col = head * d;
                sc.q.clear();
                sc.k.clear();
                sc.v.clear();
                for t in start..start + n {
                    let row = &x[t * 3 * h..][..3 * h];
                    for (part, buf) in [&mut sc.q, &mut sc.k, &mut sc.v].into_iter().enumerate() {
                        let at = part * h + col;
                        let mul = if part == 0 { scale } else { 1.0 };
                        buf.extend(
                            row[at..at + d]
                                .iter()
                                .zip(&self.bias[at..at + d])
                                .map(|(v, b)| (v + b) * mul),
                        );
                    }
                }
                sc.scores.resize(n * n, 0.0);
                // SAFETY: q and k are live n×d row-major buffers (k read as its transpose),
                // scores a live n×n one.
                unsafe {
                    small_matmul(
                        (n, n, d),
                        (sc.scores.as_mut_ptr(), n, 1),
                        (sc.q.as_ptr(), d, 1),
                        (sc.k.as_ptr(), 1, d),
                    );
                }
                kernels::softmax_rows(&mut sc.scores, n);
                // SAFETY: scores n×n and v n×d are live row-major buffers; the destination is
                // rows start..start+n, columns col..col+d of `out` ([m, h]), which only this
                // task writes (see `DisjointOut`).
                unsafe {
                    small_matmul(
                        (n, d, n),
                        (dst.at(start * h + col), h, 1),
                        (sc.scores.as_ptr(), n, 1),
                        (sc.v.as_ptr(), d, 1),
                    );
                }
            },
        );
        Ok((CpuStorage::F32(out), Shape::from((m, h))))
    }
}

/// `x = act(x + bias)` over rows of `x`, in place.
struct BiasAct<'a> {
    bias: &'a [f32],
    act: Act,
}

impl InplaceOp1 for BiasAct<'_> {
    fn name(&self) -> &'static str {
        "quarry-bias-act"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> Result<()> {
        let x = contiguous_f32_mut(s, l)?;
        let n = self.bias.len();
        let act = self.act;
        x.par_chunks_mut(n)
            .with_min_len(min_rows(n))
            .for_each(|row| kernels::bias_act_row(row, self.bias, act));
        Ok(())
    }
}

/// `x = LayerNorm(x + bias + residual)` over rows of `x`, in place.
struct BiasResidualLn<'a> {
    bias: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
}

impl InplaceOp2 for BiasResidualLn<'_> {
    fn name(&self) -> &'static str {
        "quarry-bias-residual-layernorm"
    }
    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        let res = contiguous_f32(s2, l2)?;
        let x = contiguous_f32_mut(s1, l1)?;
        if x.len() != res.len() {
            bail!(
                "residual shape mismatch: {:?} vs {:?}",
                l1.shape(),
                l2.shape()
            );
        }
        let h = self.bias.len();
        x.par_chunks_mut(h)
            .with_min_len(min_rows(h))
            .zip(res.par_chunks(h))
            .for_each(|(row, r)| {
                kernels::add2_layer_norm_row(row, self.bias, r, self.gamma, self.beta, self.eps)
            });
        Ok(())
    }
}
