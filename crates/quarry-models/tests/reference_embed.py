#!/usr/bin/env python3
"""Independent reference forward pass for quarry-models' parity tests.

numpy + safetensors + tokenizers only (no torch, no candle). Implements a plain post-LN
BERT encoder with erf-GELU in float64, the XLM-R position numbering (pad_token_id + 1 + i),
mean pooling + L2 normalisation for embeddings, and the BertForSequenceClassification
(pooler + classifier) / XLMRobertaForSequenceClassification (dense + out_proj) heads.

Usage (JSON on stdin, JSON on stdout):
    reference_embed.py embed  MODEL_DIR   <<< '{"texts": ["query: ...", ...], "max_tokens": 512}'
        -> {"ids": [[...]], "vectors": [[...]]}
    reference_embed.py rerank MODEL_DIR   <<< '{"query": "...", "passages": [...], "max_tokens": 512}'
        -> {"ids": [[...]], "logits": [[...]], "scores": [...]}

Texts are passed verbatim: the caller adds any "query: " / "passage: " prefix.
"""
import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        raw = load_file(os.path.join(model_dir, "model.safetensors"))
        anchor = "embeddings.word_embeddings.weight"
        prefix = min((k[: -len(anchor)] for k in raw if k.endswith(anchor)), key=len)
        self.w = {}
        for k, v in raw.items():
            name = k[len(prefix):] if k.startswith(prefix) else k
            self.w[name] = v.astype(np.float64)
        self.xlmr = self.cfg.get("model_type", "bert") in ("xlm-roberta", "roberta", "camembert")
        self.pad = self.cfg.get("pad_token_id", 1 if self.xlmr else 0)
        self.eps = self.cfg.get("layer_norm_eps", 1e-12)
        self.heads = self.cfg["num_attention_heads"]
        self.layers = self.cfg["num_hidden_layers"]
        self.type_vocab = self.cfg.get("type_vocab_size", 2)
        act = self.cfg.get("hidden_act", "gelu")
        self.act = gelu_erf if act == "gelu" else gelu_tanh
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()

    def lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def encode(self, ids, type_ids):
        w = self.w
        n = len(ids)
        if self.xlmr:
            pos = np.arange(n) + self.pad + 1
        else:
            pos = np.arange(n)
        types = np.array(type_ids) if self.type_vocab > 1 else np.zeros(n, dtype=np.int64)
        x = (w["embeddings.word_embeddings.weight"][np.array(ids)]
             + w["embeddings.position_embeddings.weight"][pos]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        h = x.shape[1]
        d = h // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self.lin(x, p + "attention.self.query").reshape(n, self.heads, d).transpose(1, 0, 2)
            k = self.lin(x, p + "attention.self.key").reshape(n, self.heads, d).transpose(1, 0, 2)
            v = self.lin(x, p + "attention.self.value").reshape(n, self.heads, d).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            s = s - s.max(-1, keepdims=True)
            a = np.exp(s)
            a = a / a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(1, 0, 2).reshape(n, h)
            att = self.lin(ctx, p + "attention.output.dense")
            x = layer_norm(x + att, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], self.eps)
            inter = self.act(self.lin(x, p + "intermediate.dense"))
            out = self.lin(inter, p + "output.dense")
            x = layer_norm(x + out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        return x

    def truncate(self, enc, max_tokens):
        ids, types, special = list(enc.ids), list(enc.type_ids), list(enc.special_tokens_mask)
        if len(ids) <= max_tokens:
            return ids, types
        trailing = 0
        for s in reversed(special):
            if s != 1:
                break
            trailing += 1
        trailing = min(trailing, max_tokens // 2)
        keep = max_tokens - trailing
        return ids[:keep] + ids[len(ids) - trailing:], types[:keep] + types[len(ids) - trailing:]

    def embed(self, texts, max_tokens):
        out_ids, vecs = [], []
        for t in texts:
            ids, types = self.truncate(self.tok.encode(t), max_tokens)
            x = self.encode(ids, [0] * len(ids))
            v = x.mean(0)
            v = v / max(np.linalg.norm(v), 1e-12)
            out_ids.append(ids)
            vecs.append(v.tolist())
        return {"ids": out_ids, "vectors": vecs}

    def rerank(self, query, passages, max_tokens):
        self.tok.enable_truncation(max_tokens, strategy="longest_first")
        out_ids, logits, scores = [], [], []
        for p in passages:
            enc = self.tok.encode(query, p)
            x = self.encode(enc.ids, enc.type_ids)
            cls = x[0]
            if "classifier.out_proj.weight" in self.w:
                z = self.lin(np.tanh(self.lin(cls, "classifier.dense")), "classifier.out_proj")
            else:
                z = self.lin(np.tanh(self.lin(cls, "pooler.dense")), "classifier")
            if len(z) == 1:
                s = 1.0 / (1.0 + math.exp(-z[0]))
            else:
                e = np.exp(z - z.max())
                s = float(e[1] / e.sum())
            out_ids.append(list(enc.ids))
            logits.append(z.tolist())
            scores.append(s)
        self.tok.no_truncation()
        return {"ids": out_ids, "logits": logits, "scores": scores}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("embed", "rerank"):
        sys.stderr.write(__doc__)
        sys.exit(2)
    req = json.load(sys.stdin)
    model = Model(sys.argv[2])
    max_tokens = int(req.get("max_tokens", 512))
    if sys.argv[1] == "embed":
        res = model.embed(req["texts"], max_tokens)
    else:
        res = model.rerank(req["query"], req["passages"], max_tokens)
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
