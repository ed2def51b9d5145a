"""Embedding at the machine's limit (issue 26): Quarry side by side with what a user would
reach for, on the same machine, the same model directories and the same passages.

Two parts, one run:

1. **A real document, end to end.** `quarry serve` with multilingual-e5-small; the 251-page
   Chinese manual (zh-debian-reference.zh-cn.pdf) uploaded to a knowledge base over REST.
   Measured: time until keyword-searchable (status `embedding`), time until fully embedded
   (status `ready`), chunks, and the server's resident memory (idle, peak, 15 s after the
   batch). The chunks Quarry embedded (their embedding inputs, read back over REST) are
   written out for part 2.
2. **Models, same passages.** For all-MiniLM-L6-v2 and multilingual-e5-small, an evenly
   spaced sample of those page-length chunks is embedded by
   - Quarry (`quarry-models` example `embed_bench`, release build: chunks/s, GFLOP/s and its
     share of a measured fp32 matmul peak),
   - sentence-transformers on PyTorch CPU (PyPI `sentence-transformers`, `torch`),
   - ONNX Runtime (PyPI `onnxruntime`) on an ONNX export of the same model directory
     (`torch.onnx.export`, made here: no ONNX file ships with these models),
   - ONNX Runtime dynamic int8 (`onnxruntime.quantization.quantize_dynamic` of that export:
     int8 weights, activations quantised per call),
   each with every core, batch 32, the model's own input limit and prefixes; each tool runs once
   per round, in turn, and the best of 3 rounds counts. Quarry runs once per kernel path this
   CPU has (`embed_bench --path=`: fp32 AVX-512 and fp32 through the gemm crate (AVX2), int8
   AVX512-VNNI and int8 AVX2); every tool's vectors are compared by cosine with
   sentence-transformers' fp32 ones, and each int8 tool's with its own fp32 ones.
3. **The machine's peaks, same run.** fp32: torch and numpy matmul at the encoder's shapes
   and at 1024³; int8: PyTorch's dynamically quantised Linear (fbgemm, VNNI where present) at
   the encoder's shapes; plus `embed_bench`'s register-level peaks. Each Quarry path's GFLOP/s
   (GOP/s for int8) is reported as a share of the measured peak of its kind.

`--skip-document` with no passages from an earlier run takes whole tldr pages
(`--tldr`, ~150–250 tokens each) as the passages.

Usage (from the repository root; `bench/embed/run.sh` builds what it needs first):

    python bench/embed/run.py --quarry BIN --embed-bench BIN --doc PDF \\
        --minilm DIR --e5 DIR --out bench/results/embed.json

Run it with the models venv's Python (`scripts/setup-models`; it has torch,
sentence-transformers and onnxruntime). Figures go to OUT (JSON) and OUT with `.txt`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchkit import cpu_model, free_port, isolated_env, loadavg, save  # noqa: E402


def log(*a):
    print("[embed]", *a, file=sys.stderr, flush=True)


def http(method, url, body=None, headers=None, timeout=120):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def rss_mb(pid):
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    except OSError:
        pass
    return None


class RssSampler(threading.Thread):
    """Samples a process's resident memory every 100 ms; `peak` is the largest seen."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            v = rss_mb(self.pid)
            if v is not None:
                self.peak = max(self.peak, v)
            time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# Part 1: a real document through the server.


def document_end_to_end(quarry, model, doc, workdir, timeout, quantize=None):
    home = Path(tempfile.mkdtemp(prefix="quarry-embed-", dir=workdir))
    env = isolated_env(home)
    env["QUARRY_EMBED_MODEL"] = str(model)
    if quantize:
        env["QUARRY_EMBED_QUANTIZE"] = quantize
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    logf = open(home / "server.log", "w")
    proc = subprocess.Popen([str(quarry), "serve", "--port", str(port)], env=env,
                            stdout=logf, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http("GET", base + "/health", timeout=2)[0] == 200:
                    break
            except (urllib.error.URLError, OSError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {home / 'server.log'}")
            time.sleep(0.1)
        idle = rss_mb(proc.pid)
        st, kb = http("POST", base + "/api/v1/knowledge-bases",
                      json.dumps({"name": "manual"}).encode(), {"content-type": "application/json"})
        assert st == 201, kb
        kb_id = kb["data"]["id"]
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
                f"filename=\"{doc.name}\"\r\nContent-Type: application/pdf\r\n\r\n").encode()
        body += doc.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        sampler = RssSampler(proc.pid)
        sampler.start()
        t0 = time.monotonic()
        st, up = http("POST", f"{base}/api/v1/knowledge-bases/{kb_id}/documents", body,
                      {"content-type": f"multipart/form-data; boundary={boundary}"}, timeout=300)
        assert st == 202, up
        doc_id = up["data"][0]["document"]["id"]
        searchable = ready = None
        queue_seen = []
        while True:
            st, d = http("GET", f"{base}/api/v1/knowledge-bases/{kb_id}/documents/{doc_id}")
            status = d["data"]["status"] if st == 200 else None
            now = time.monotonic() - t0
            if searchable is None and status in ("embedding", "ready"):
                searchable = now
            if status == "ready":
                ready = now
                break
            if status == "failed":
                raise RuntimeError(f"the document failed: {d}")
            if now > timeout:
                raise RuntimeError(f"not embedded after {timeout} s")
            if len(queue_seen) < 400:
                st, q = http("GET", base + "/api/v1/queue")
                if st == 200:
                    queue_seen.append({"t": round(now, 1), **q["data"]})
            time.sleep(0.5)
        peak = sampler.peak
        time.sleep(15)
        after = rss_mb(proc.pid)
        sampler.stop.set()
        st, ch = http("GET", f"{base}/api/v1/knowledge-bases/{kb_id}/documents/{doc_id}/chunks")
        assert st == 200, ch
        chunks = ch["data"]
        passages = workdir / "passages.jsonl"
        with open(passages, "w") as f:
            for c in chunks:
                # What Quarry embeds: the heading the chunk sits under, then its text.
                head = (c.get("heading") or "").strip()
                text = f"{head}\n\n{c['content']}" if head else c["content"]
                f.write(json.dumps(text, ensure_ascii=False) + "\n")
        return {
            "document": doc.name,
            "model": Path(model).name,
            "chunks": len(chunks),
            "keyword_searchable_s": round(searchable or 0, 2),
            "fully_embedded_s": round(ready, 2),
            "embedded_chunks_per_s": round(len(chunks) / max(ready - (searchable or 0), 1e-9), 2),
            "rss_mb": {"idle_before_upload": round(idle or 0), "peak": round(peak),
                       "15s_after_batch": round(after or 0)},
            "queue_samples": queue_seen[:: max(1, len(queue_seen) // 20)],
        }, passages
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        logf.close()


# ---------------------------------------------------------------------------------------------
# Part 2: the same passages through each tool.


def sample(passages, n, out):
    lines = [ln for ln in passages.read_text().splitlines() if ln.strip()]
    step = max(1, len(lines) // n)
    picked = lines[::step][:n]
    out.write_text("\n".join(picked) + "\n")
    return len(picked)


def quarry_bench(embed_bench, model, passages, n, engine="fused", path=None, vectors=None):
    env = dict(os.environ, QUARRY_BENCH_PASSAGES=f"file:{passages}", QUARRY_BENCH_RUNS="1",
               QUARRY_BENCH_ENGINE=engine)
    cmd = [str(embed_bench), str(model), str(n)]
    if path:
        cmd.append(f"--path={path}")
    if vectors:
        cmd.append(f"--vectors={vectors}")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"embed_bench failed: {r.stderr[-2000:]}")
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("json "))
    return json.loads(line[5:])


def read_vectors(path):
    import numpy as np
    return np.array([json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()],
                    dtype=np.float64)


def cosines(a, b):
    """Worst and mean cosine between matching rows of two vector lists."""
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    c = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"min": round(float(c.min()), 5), "mean": round(float(c.mean()), 5)}


# Quarry's kernel paths, by (engine, --path): the best this CPU has and the AVX2 one.
QUARRY_PATHS = [("fp32_avx512", "fused", "avx512"), ("fp32_gemm_avx2", "fused", "avx2"),
                ("int8_vnni", "int8", "avx512"), ("int8_avx2", "int8", "avx2")]


def prefix_for(model):
    return "passage: " if "e5" in Path(model).name.lower() else ""


def sentence_transformers_runner(model, texts, threads):
    """Loads the model; returns its description and a function timing one encode of `texts`."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    st = SentenceTransformer(str(model), device="cpu")
    inputs = [prefix_for(model) + t for t in texts]
    st.encode(inputs[:32], batch_size=32)

    def once():
        t = time.perf_counter()
        v = st.encode(inputs, batch_size=32, normalize_embeddings=True)
        assert len(v) == len(texts)
        return time.perf_counter() - t

    def vectors():
        return st.encode(inputs, batch_size=32, normalize_embeddings=True)

    return {"tool": f"sentence-transformers {__import__('sentence_transformers').__version__} "
                    f"(torch {torch.__version__}, {threads} threads)",
            "max_seq_length": st.max_seq_length}, once, vectors


def onnx_export(model, dest):
    import torch
    from transformers import AutoModel

    if dest.exists():
        return dest
    class Encoder(torch.nn.Module):
        """The model's last hidden state from ids and mask (keyword arguments: the positional
        order of `forward` differs between transformers versions)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    m = Encoder(AutoModel.from_pretrained(str(model)).eval()).eval()
    ids = torch.ones((2, 16), dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(m, (ids, mask), str(dest), input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                    "last_hidden_state": axes})
    return dest


def onnx_quantize(src, dest):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if not dest.exists():
        quantize_dynamic(str(src), str(dest), weight_type=QuantType.QInt8)
    return dest


def onnxruntime_runner(model, texts, threads, max_len, workdir, int8=False):
    """Exports (and with `int8` dynamically quantises) and loads the model; returns its
    description, a function timing one pass and a function returning the vectors."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    path = onnx_export(model, workdir / f"{Path(model).name}.onnx")
    if int8:
        path = onnx_quantize(path, workdir / f"{Path(model).name}.int8.onnx")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(Path(model) / "tokenizer.json"))
    tok.enable_truncation(max_len)
    # all-MiniLM-L6-v2's tokenizer.json pads every text to 128 tokens: without this, short
    # texts were pooled over their padding (mask built from the padded length) and computed
    # at 128 tokens.
    tok.no_padding()
    inputs = [prefix_for(model) + t for t in texts]

    def run():
        enc = tok.encode_batch(inputs)
        order = sorted(range(len(enc)), key=lambda i: -len(enc[i].ids))
        out = [None] * len(enc)
        for s in range(0, len(order), 32):
            batch = order[s:s + 32]
            n = max(len(enc[i].ids) for i in batch)
            ids = np.zeros((len(batch), n), dtype=np.int64)
            mask = np.zeros((len(batch), n), dtype=np.int64)
            for r, i in enumerate(batch):
                e = enc[i].ids
                ids[r, :len(e)] = e
                mask[r, :len(e)] = 1
            (h,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
            pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            for r, i in enumerate(batch):
                out[i] = pooled[r]
        return out

    run()

    def once():
        t = time.perf_counter()
        v = run()
        assert len(v) == len(texts)
        return time.perf_counter() - t

    kind = "dynamic int8 (quantize_dynamic, QInt8 weights)" if int8 else "fp32"
    return ({"tool": f"onnxruntime {ort.__version__} {kind} ({threads} threads, ORT_ENABLE_ALL)"},
            once, run)


def measured_peaks(threads, shapes):
    """fp32 and int8 GEMM peaks of this machine at `threads` threads: torch and numpy fp32
    matmul at the encoder's shapes and 1024³, PyTorch's dynamic int8 Linear (fbgemm) at the
    encoder's shapes. GFLOP/s / GOP/s, 2 per multiply-add, best of a few repetitions."""
    import numpy as np
    import torch

    torch.set_num_threads(threads)

    def best(fn, ops, reps=5):
        fn()
        t = min(_timed(fn) for _ in range(reps))
        return round(ops / t / 1e9, 1)

    out = {"threads": threads, "fp32_torch": {}, "fp32_numpy": {}, "int8_torch_dynamic": {}}
    for (m, k, n) in shapes + [(1024, 1024, 1024)]:
        key = f"{m}x{k}x{n}"
        a, b = torch.randn(m, k), torch.randn(k, n)
        out["fp32_torch"][key] = best(lambda: torch.mm(a, b), 2 * m * k * n)
        an, bn = a.numpy(), b.numpy()
        out["fp32_numpy"][key] = best(lambda: an @ bn, 2 * m * k * n)
        if (m, k, n) != (1024, 1024, 1024):
            lin = torch.nn.Linear(k, n)
            q = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                       dtype=torch.qint8)
            with torch.inference_mode():
                out["int8_torch_dynamic"][key] = best(lambda: q(a), 2 * m * k * n)
    out["fp32_peak_gflops"] = max(max(out["fp32_torch"].values()), max(out["fp32_numpy"].values()))
    out["int8_peak_gops"] = max(out["int8_torch_dynamic"].values())
    out["numpy_config"] = _numpy_blas()
    return out


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _numpy_blas():
    import numpy as np
    try:
        cfg = np.show_config(mode="dicts")
        return cfg.get("Build Dependencies", {}).get("blas", {}).get("name")
    except Exception:  # older numpy
        return None


def models_side_by_side(embed_bench, models, passages, n, threads, workdir, rounds=3):
    """Each tool once per round, the rounds interleaved (Quarry's paths, sentence-transformers,
    ONNX Runtime fp32 and int8, then again): a shared machine's speed drifts over minutes, and
    a tool timed only early or late would carry that drift. Best round per tool."""
    import numpy as np

    picked = workdir / "sample.jsonl"
    n = sample(passages, n, picked)
    texts = [json.loads(ln) for ln in picked.read_text().splitlines() if ln.strip()]
    rows = []
    for model in models:
        name = Path(model).name
        log(f"{name}: loading sentence-transformers and ONNX Runtime")
        st, st_once, st_vectors = sentence_transformers_runner(model, texts, threads)
        ox, ox_once, ox_vecs = {}, {}, {}
        for key, int8 in (("onnxruntime", False), ("onnxruntime_int8", True)):
            try:
                ox[key], ox_once[key], run = onnxruntime_runner(
                    model, texts, threads, st["max_seq_length"], workdir, int8=int8)
                ox_vecs[key] = np.array(run())
            except Exception as e:  # an export that fails is reported, not fatal
                ox[key] = {"tool": "onnxruntime", "error": str(e)[:500]}
        ref = np.array(st_vectors())
        quarry, times = {}, {"st": [], **{k: [] for k in ox_once}}
        vec_files = {}
        for r in range(rounds):
            log(f"{name}: round {r + 1} of {rounds}")
            for key, engine, path in QUARRY_PATHS:
                vec_files[key] = workdir / f"{name}.{key}.vectors.jsonl"
                run = quarry_bench(embed_bench, model, picked, n, engine=engine, path=path,
                                   vectors=vec_files[key])
                if key not in quarry or run["chunks_per_s"] > quarry[key]["chunks_per_s"]:
                    quarry[key] = run
            times["st"].append(st_once())
            for key, once in ox_once.items():
                times[key].append(once())
        st.update(seconds=min(times["st"]), chunks_per_s=n / min(times["st"]))
        for key in ox_once:
            ox[key].update(seconds=min(times[key]), chunks_per_s=n / min(times[key]),
                           cosine_to_sentence_transformers=cosines(ox_vecs[key], ref))
        if "onnxruntime_int8" in ox_vecs and "onnxruntime" in ox_vecs:
            ox["onnxruntime_int8"]["cosine_to_own_fp32"] = cosines(ox_vecs["onnxruntime_int8"],
                                                                   ox_vecs["onnxruntime"])
        qv = {k: read_vectors(f) for k, f in vec_files.items()}
        for key, run in quarry.items():
            run["cosine_to_sentence_transformers"] = cosines(qv[key], ref)
            if key.startswith("int8"):
                run["cosine_to_own_fp32"] = cosines(qv[key], qv["fp32_avx512"])
        rows.append({"model": name, "passages": n, "rounds": rounds,
                     # The fields earlier reports had: the best paths this CPU has.
                     "quarry": quarry["fp32_avx512"], "quarry_int8": quarry["int8_vnni"],
                     "quarry_paths": quarry, "sentence_transformers": st,
                     "onnxruntime": ox["onnxruntime"],
                     "onnxruntime_int8": ox.get("onnxruntime_int8")})
    return rows


def text_report(rep):
    m = rep["meta"]
    out = [f"# Embedding benchmark ({m['date']})",
           f"machine: {m['cpus']} CPUs ({m['cpu']}), load {m['load_start']} at start, "
           f"{m.get('load_end')} at end", f"quarry: {m['quarry']}", ""]
    for key, label in (("document_baseline", f"baseline build ({m.get('baseline_quarry')})"),
                       ("document", "this build"),
                       ("document_int8", "this build, QUARRY_EMBED_QUANTIZE=int8")):
        e = rep.get(key)
        if not e:
            continue
        out += [f"## {e['document']} through `quarry serve` ({e.get('model', 'multilingual-e5-small')}), {label}",
                f"chunks                {e['chunks']}",
                f"keyword-searchable    {e['keyword_searchable_s']} s",
                f"fully embedded        {e['fully_embedded_s']} s "
                f"({e['embedded_chunks_per_s']} chunks/s while embedding)",
                f"resident memory (MB)  idle {e['rss_mb']['idle_before_upload']}, "
                f"peak {e['rss_mb']['peak']}, 15 s after {e['rss_mb']['15s_after_batch']}", ""]
    if rep.get("document_baseline") and rep.get("document"):
        b, e = rep["document_baseline"], rep["document"]
        out += [f"fully embedded: {b['fully_embedded_s']} s → {e['fully_embedded_s']} s "
                f"({b['fully_embedded_s'] / max(e['fully_embedded_s'], 1e-9):.1f}× faster)", ""]
    if rep.get("document_baseline") and rep.get("document_int8"):
        b, e = rep["document_baseline"], rep["document_int8"]
        out += [f"fully embedded, int8: {b['fully_embedded_s']} s → {e['fully_embedded_s']} s "
                f"({b['fully_embedded_s'] / max(e['fully_embedded_s'], 1e-9):.1f}× faster)", ""]
    out += ["## Same page-length passages, same model directories (chunks/s, best round of 3, rounds interleaved)",
            f"{'model':24} {'passages':>8} {'tokens':>7} {'quarry':>8} {'int8':>8} {'s-t/torch':>10} "
            f"{'onnxrt':>8} {'GFLOP/s':>8} {'of peak':>8}"]
    for r in rep.get("models", []):
        q, st, ox = r["quarry"], r["sentence_transformers"], r["onnxruntime"]
        ox_s = f"{ox['chunks_per_s']:.2f}" if "chunks_per_s" in ox else "error"
        q8 = f"{r['quarry_int8']['chunks_per_s']:.2f}" if r.get("quarry_int8") else "-"
        out.append(f"{r['model']:24} {r['passages']:>8} {q['mean_tokens']:>7.0f} "
                   f"{q['chunks_per_s']:>8.2f} {q8:>8} {st['chunks_per_s']:>10.2f} {ox_s:>8} "
                   f"{q['gflops_real']:>8.1f} {100 * q['share_of_peak']:>7.1f}%")
    out += ["", "peak = candle's 1024x1024x1024 fp32 matmul on this machine, measured in the "
            "same run; GFLOP/s and the share of peak are the fp32 engine's, over the encoder's "
            "matrix products for the real tokens. int8: QUARRY_EMBED_QUANTIZE=int8 (int8 weights "
            "and activations; the peers run fp32)."]
    pk = rep.get("peaks")
    if pk:
        out += ["", f"## This machine's measured peaks ({pk['threads']} threads, same run)",
                f"fp32 GEMM peak     {pk['fp32_peak_gflops']} GFLOP/s "
                f"(torch {pk['fp32_torch']}, numpy/{pk.get('numpy_config')} {pk['fp32_numpy']})",
                f"int8 GEMM peak     {pk['int8_peak_gops']} GOP/s "
                f"(PyTorch dynamic int8 Linear {pk['int8_torch_dynamic']})"]
    for r in rep.get("models", []):
        paths = r.get("quarry_paths")
        if not paths:
            continue
        st = r["sentence_transformers"]
        out += ["", f"## {r['model']}: per path ({r['passages']} passages, "
                    f"mean {r['quarry']['mean_tokens']:.0f} tokens; chunks/s, best of {r['rounds']})",
                f"{'tool / path':34} {'chunks/s':>9} {'G(FL)OP/s':>10} {'of peak':>8} "
                f"{'of reg.':>8} {'cos s-t':>8} {'cos fp32':>9}"]
        for key, q in paths.items():
            kind = "int8_peak_gops" if key.startswith("int8") else "fp32_peak_gflops"
            share = f"{100 * q['gflops_real'] / pk[kind]:.1f}%" if pk else "-"
            own = q.get("cosine_to_own_fp32", {}).get("min", "")
            out.append(f"{'quarry ' + key:34} {q['chunks_per_s']:>9.2f} {q['gflops_real']:>10.1f} "
                       f"{share:>8} {100 * q.get('share_of_register_peak', 0):>7.1f}% "
                       f"{q['cosine_to_sentence_transformers']['min']:>8} {own:>9}")
        out.append(f"{'sentence-transformers fp32':34} {st['chunks_per_s']:>9.2f}")
        for key in ("onnxruntime", "onnxruntime_int8"):
            ox = r.get(key)
            if not ox:
                continue
            if "chunks_per_s" not in ox:
                out.append(f"{key:34} error: {ox.get('error', '')[:80]}")
                continue
            own = ox.get("cosine_to_own_fp32", {}).get("min", "")
            out.append(f"{key:34} {ox['chunks_per_s']:>9.2f} {'':>10} {'':>8} {'':>8} "
                       f"{ox['cosine_to_sentence_transformers']['min']:>8} {own:>9}")
    if pk:
        out += ["", "of peak: GFLOP/s (int8: GOP/s) over the encoder's matrix products for the real "
                "tokens, as a share of the measured GEMM peak of its kind above; of reg.: of "
                "embed_bench's register-level peak (fp32 zmm FMA, int8 zmm vpdpbusd) at the same "
                "threads. cos s-t: worst cosine to sentence-transformers' fp32 vectors; cos fp32: "
                "worst cosine of an int8 tool's vectors to its own fp32 ones."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quarry", required=True, type=Path)
    ap.add_argument("--embed-bench", required=True, type=Path)
    ap.add_argument("--doc", required=True, type=Path)
    ap.add_argument("--minilm", required=True, type=Path)
    ap.add_argument("--e5", required=True, type=Path)
    ap.add_argument("--doc-model", type=Path,
                    help="the model of the document part (default: --e5)")
    ap.add_argument("--sample", type=int, default=128, help="passages per model comparison")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-document", action="store_true",
                    help="reuse WORKDIR/passages.jsonl from an earlier run")
    ap.add_argument("--skip-models", action="store_true", help="the document part only")
    ap.add_argument("--skip-int8", action="store_true",
                    help="no document run with QUARRY_EMBED_QUANTIZE=int8")
    ap.add_argument("--baseline-quarry", type=Path,
                    help="an earlier build: the document part runs with it too, first")
    ap.add_argument("--tldr", type=Path, default=Path("/work/shared/corpora/tldr/pages"),
                    help="whole pages as passages when --skip-document finds none")
    ap.add_argument("--skip-peaks", action="store_true")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "quarry-embed-bench")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", type=Path, default=Path("bench/results/embed.json"))
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    rep = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                    "cpus": os.cpu_count(), "cpu": cpu_model(), "load_start": loadavg(),
                    "quarry": str(a.quarry)}}
    passages = a.workdir / "passages.jsonl"
    doc_model = a.doc_model or a.e5
    if a.baseline_quarry and not a.skip_document:
        log(f"{a.doc.name} through the baseline's quarry serve")
        rep["meta"]["baseline_quarry"] = str(a.baseline_quarry)
        rep["document_baseline"], _ = document_end_to_end(a.baseline_quarry, doc_model, a.doc,
                                                          a.workdir, a.timeout)
        log(json.dumps({k: v for k, v in rep["document_baseline"].items() if k != "queue_samples"}))
    if not a.skip_document:
        log(f"{a.doc.name} through quarry serve")
        rep["document"], passages = document_end_to_end(a.quarry, doc_model, a.doc, a.workdir, a.timeout)
        log(json.dumps({k: v for k, v in rep["document"].items() if k != "queue_samples"}))
    if not a.skip_document and not a.skip_int8:
        log(f"{a.doc.name} through quarry serve, QUARRY_EMBED_QUANTIZE=int8")
        rep["document_int8"], _ = document_end_to_end(a.quarry, doc_model, a.doc, a.workdir,
                                                      a.timeout, quantize="int8")
        log(json.dumps({k: v for k, v in rep["document_int8"].items() if k != "queue_samples"}))
    if a.skip_document and not passages.exists():
        pages = sorted(a.tldr.rglob("*.md"))
        with open(passages, "w") as f:
            for p in pages[:: max(1, len(pages) // 400)]:
                f.write(json.dumps(p.read_text(), ensure_ascii=False) + "\n")
        rep["meta"]["passages"] = f"whole tldr pages from {a.tldr}"
    if not a.skip_peaks:
        log("measuring this machine's fp32 and int8 GEMM peaks")
        # The encoder's products for a batch of 32 page-length chunks (~4096 tokens).
        rep["peaks"] = measured_peaks(a.threads, [(4096, 384, 1152), (4096, 384, 1536),
                                                  (4096, 1536, 384)])
        log(json.dumps(rep["peaks"]))
    rep["models"] = [] if a.skip_models else models_side_by_side(
        a.embed_bench, [a.minilm, a.e5], passages, a.sample, a.threads, a.workdir)
    save(rep, a.out, text_report)
    print(text_report(rep))


if __name__ == "__main__":
    main()
