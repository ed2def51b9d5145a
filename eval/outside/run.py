#!/usr/bin/env python3
"""Quarry's search on public sets nobody on the team wrote (eval/outside/data/<set>/), beside plain BM25.

    python3 eval/outside/run.py --quarry "$CARGO_TARGET_DIR/release/quarry" \
        [--sets seal-tools,locomo] [--models minilm,e5] [--limit N] [--workers 2] [--home-root DIR]

Per set, and per model (plus once without one), a fresh QUARRY_HOME and `quarry serve` on a
loopback port (eval/long_docs.py's `Server`), one knowledge base per set (per `group`: LoCoMo
asks each question only of its own conversation), every corpus item uploaded as one Markdown
file (`# title`, blank line, text) through `POST /api/v1/knowledge-bases/{kb}/documents`, then
every query through `POST /api/v1/knowledge-search`:

- without a model: `keyword` (min_score 0, top_k 50) and the default (no `search_mode`, no
  `min_score`: keyword at 0.5);
- per model (QUARRY_EMBED_MODEL): `vector` and `hybrid` (min_score 0, top_k 50) and the default
  (hybrid at 0.5). `keyword` with a model is also run: with a model configured Quarry scores a
  keyword hit on both retrievers' evidence, so it is not the same ranking as without one.

Results are passages; a document's rank is its best passage's. Beside them plain BM25
(rank_bm25 BM25Okapi over title + text; NFKC, lower case, camelCase/snake_case split with the
whole identifier kept, Han runs cut by jieba's search mode). "Vector alone" is Quarry's
`vector` mode (no model runtime here to embed in Python).

Metrics over answerable queries: Hit@1, Hit@5, Recall@5 (share of the relevant ids in the top
5; for LoCoMo the evidence recall), nDCG@10 (binary), MRR@10; for the default: the share of
queries with no result and Hit@5. Writes results/<set>.json (summary, every query's top-10 ids
per run) and results/<set>.md, and prints the table. Needs rank_bm25 and jieba
(pip install rank_bm25 jieba).
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
import unicodedata
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from long_docs import Server, eprint  # noqa: E402  (the same server harness as the long-docs eval)

MODELS = {"minilm": ("QUARRY_TEST_MINILM", "all-MiniLM-L6-v2"), "e5": ("QUARRY_TEST_E5", "multilingual-e5-small")}
TOP_K = 50
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


# --------------------------------------------------------------------------- data

def load(set_dir, limit):
    corpus = [json.loads(x) for x in open(set_dir / "corpus.jsonl", encoding="utf-8") if x.strip()]
    queries = [json.loads(x) for x in open(set_dir / "queries.jsonl", encoding="utf-8") if x.strip()]
    if limit:
        # deterministic: the first `limit` answerable queries in file order (ids are stable)
        queries = [q for q in queries if q["answerable"]][:limit]
    return corpus, queries


# Sets about the same kind of thing (tools and APIs): their questions are not asked of each
# other's corpus as "unrelated" ones, since a tool set can answer another's requests.
RELATED = [{"seal-tools", "gorilla", "metatool"}]


def unrelated_queries(data, own, n):
    """The first `n` answerable queries (by sha1 of set and id) of every set unrelated to `own`:
    questions its corpus cannot answer, for the share the default threshold leaves empty."""
    out = []
    for d in sorted(p for p in Path(data).iterdir() if (p / "queries.jsonl").is_file()):
        s = d.name
        if s == own or any(own in r and s in r for r in RELATED):
            continue
        _, qs = load(d, 0)
        qs = sorted((q for q in qs if q["answerable"]), key=lambda q: hashlib.sha1(f"{s}:{q['id']}".encode()).hexdigest())
        out += [dict(q, id=f"{s}/{q['id']}", set=s, foreign=True, answerable=False, relevant=[]) for q in qs[:n]]
    return out


def groups_of(corpus):
    g = {}
    for c in corpus:
        g.setdefault(c.get("group", ""), []).append(c)
    return g


def kb_name(set_name, group):
    return re.sub(r"[^a-z0-9-]+", "-", f"out-{set_name}-{group}".lower()).strip("-")


# --------------------------------------------------------------------------- BM25

def tokenize(s):
    import jieba
    s = unicodedata.normalize("NFKC", s)
    out = []
    for seg in re.split(f"([{HAN}]+)", s):
        if not seg:
            continue
        if re.match(f"[{HAN}]", seg):
            out += [t for t in jieba.cut_for_search(seg) if t.strip()]
            continue
        for ident in re.findall(r"[^\W_]+(?:[_\-][^\W_]+)*", seg):
            parts = []
            for p in re.split(r"[_\-]", ident):
                parts += re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", p)
            parts = [p.lower() for p in parts if p]
            out += parts
            if len(parts) > 1:
                out.append(ident.lower())
    return out


def bm25_rankings(corpus, queries):
    import jieba
    from rank_bm25 import BM25Okapi
    jieba.setLogLevel(60)
    ranked = {}
    for g, items in groups_of(corpus).items():
        bm = BM25Okapi([tokenize(c["title"] + "\n" + c["text"]) for c in items])
        for q in queries:
            if q.get("group", "") != g:
                continue
            scores = bm.get_scores(tokenize(q["query"]))
            order = sorted(range(len(items)), key=lambda i: (-scores[i], items[i]["id"]))[:TOP_K]
            ranked[q["id"]] = [items[i]["id"] for i in order if scores[i] > 0]
    return ranked


# --------------------------------------------------------------------------- Quarry

def upload_batch(srv, kb, files):
    boundary = uuid.uuid4().hex
    body = b""
    for name, text in files:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                 f"Content-Type: text/markdown\r\n\r\n").encode() + text.encode("utf-8") + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return srv.request("POST", f"/api/v1/knowledge-bases/{kb}/documents", body,
                       {"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=600)


def index(srv, set_name, corpus, want_vectors, timeout):
    """One knowledge base per group; one Markdown file per corpus item; waits until ready/embedded."""
    t0 = time.monotonic()
    names = {}  # kb -> {file name: corpus id}
    for g, items in groups_of(corpus).items():
        kb = kb_name(set_name, g)
        code, body = srv.request("POST", "/api/v1/knowledge-bases", {"name": kb})
        if code not in (200, 201):
            sys.exit(f"creating knowledge base {kb}: {code} {body}")
        names[kb] = {}
        batch = []
        if len({(c["title"], c["text"]) for c in items}) != len(items):
            sys.exit(f"{set_name}: items with identical title and text (Quarry keeps one): run prepare.py again")
        for i, c in enumerate(items):
            fname = f"{i:05d}.md"
            names[kb][fname] = c["id"]
            batch.append((fname, f"# {c['title']}\n\n{c['text']}\n"))
            if len(batch) == 100 or i == len(items) - 1:
                code, body = upload_batch(srv, kb, batch)
                if code not in (200, 201, 202):
                    sys.exit(f"uploading to {kb}: {code} {body}")
                batch = []
    eprint(f"  uploaded {len(corpus)} items into {len(names)} knowledge base(s) in {time.monotonic() - t0:.0f}s")
    last = None
    while True:
        ready = failed = total = 0
        for kb in names:
            code, body = srv.request("GET", f"/api/v1/knowledge-bases/{kb}/documents")
            for d in body.get("data", []) if code == 200 else []:
                total += 1
                ready += d.get("status") == "ready"
                failed += d.get("status") == "failed"
        line = f"ready {ready}/{len(corpus)} failed {failed}"
        pending = len(corpus) - ready - failed
        if not pending and want_vectors:
            # Chunks, not documents (see wait_embedded).
            code, st = srv.request("GET", "/status")
            need = st.get("chunks_needing_embedding", 1) if code == 200 else 1
            line += f" chunks to embed {need}"
            pending = need
        if line != last:
            eprint(f"  [{time.monotonic() - t0:5.0f}s] {line}")
            last = line
        if not pending:
            break
        if time.monotonic() - t0 > timeout:
            sys.exit(f"not ready after {timeout}s: {line}")
        time.sleep(3)
    return names, time.monotonic() - t0


def wait_embedded(srv, timeout):
    """Until no chunk waits for its vector: a home cut again by a newer chunker gets its
    stored embeddings back (by text) through the embedding queue, not at once."""
    t0 = time.monotonic()
    while True:
        # Chunks, not documents: a document whose chunks all found their stored vectors
        # stays counted in `needs_embedding` (noted in issue 66's closing note).
        code, st = srv.request("GET", "/status")
        need = st.get("chunks_needing_embedding", 1) if code == 200 else 1
        if not need:
            return
        if time.monotonic() - t0 > timeout:
            sys.exit(f"still {need} chunks to embed after {timeout}s")
        time.sleep(3)


def ask_all(srv, names, set_name, queries, runs, workers):
    """runs: [(label, search_mode or None, min_score or None, top_k)] -> {label: {qid: [ids]}}"""
    def ask(task):
        label, mode, min_score, top_k, q = task
        group = q.get("group", "")
        if q.get("foreign"):
            # an unrelated question goes to one of the set's knowledge bases, chosen by its id
            kbs = sorted(names)
            kb = kbs[int(hashlib.sha1(q["id"].encode()).hexdigest(), 16) % len(kbs)]
        else:
            kb = kb_name(set_name, group)
        body = {"query": q["query"], "knowledge_base_ids": [kb], "top_k": top_k}
        if mode:
            body["search_mode"] = mode
        if min_score is not None:
            body["min_score"] = min_score
        code, out = srv.request("POST", "/api/v1/knowledge-search", body)
        if code != 200:
            raise RuntimeError(f"knowledge-search {body}: {code} {out}")
        ids = []
        for r in out.get("results", []):
            fname = r.get("knowledge_filename") or Path(r.get("file") or "").name
            cid = names[kb].get(fname)
            if cid is None:
                raise RuntimeError(f"result from an unknown file {fname!r} in {kb}")
            if cid not in ids:
                ids.append(cid)
        return label, q["id"], ids

    out = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for label, mode, min_score, top_k in runs:
            t0 = time.monotonic()
            try:
                for lab, qid, ids in pool.map(ask, [(label, mode, min_score, top_k, q) for q in queries]):
                    out.setdefault(lab, {})[qid] = ids
            except RuntimeError as e:
                sys.exit(str(e))
            eprint(f"  {label}: {len(queries)} queries in {time.monotonic() - t0:.1f}s")
    return out


# --------------------------------------------------------------------------- metrics

def metrics(queries, ranked, default=False):
    qs = [q for q in queries if q["answerable"]]
    n = len(qs)
    if not n:
        return {}
    h1 = h5 = r5 = nd = mrr = empty = 0.0
    for q in qs:
        rel = set(q["relevant"])
        ids = ranked.get(q["id"], [])
        empty += not ids
        h1 += bool(ids[:1]) and ids[0] in rel
        h5 += any(i in rel for i in ids[:5])
        r5 += len(rel & set(ids[:5])) / len(rel)
        dcg = sum(1 / math.log2(i + 2) for i, x in enumerate(ids[:10]) if x in rel)
        idcg = sum(1 / math.log2(i + 2) for i in range(min(len(rel), 10)))
        nd += dcg / idcg
        first = next((i for i, x in enumerate(ids[:10]) if x in rel), None)
        mrr += 1 / (first + 1) if first is not None else 0
    m = {"queries": n, "hit@1": h1 / n, "hit@5": h5 / n, "recall@5": r5 / n, "ndcg@10": nd / n, "mrr@10": mrr / n}
    if default:
        m["empty"] = empty / n
        foreign = [q for q in queries if q.get("foreign")]
        if foreign:
            m["unrelated_empty"] = sum(not ranked.get(q["id"]) for q in foreign) / len(foreign)
    return m


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(set_name, rows):
    out = [f"| {set_name}: retriever | model | Hit@1 | Hit@5 | Recall@5 | nDCG@10 | MRR@10 | answerable empty at default | unrelated empty at default |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, model, m in rows:
        if not m:
            continue
        e = f"{m['empty']:.3f}" if "empty" in m else ""
        u = f"{m['unrelated_empty']:.3f}" if "unrelated_empty" in m else ""
        out.append(f"| {label} | {model} | {m['hit@1']:.3f} | {m['hit@5']:.3f} | {m['recall@5']:.3f} | "
                   f"{m['ndcg@10']:.3f} | {m['mrr@10']:.3f} | {e} | {u} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quarry",
        default=os.environ.get("QUARRY_BIN")
        or os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "quarry"),
    )
    ap.add_argument("--data", default=str(HERE / "data"))
    ap.add_argument("--sets", default="seal-tools,locomo,gorilla,domainrag")
    ap.add_argument("--models", default="minilm,e5", help="comma list of minilm,e5 (paths from QUARRY_TEST_MINILM/"
                    "QUARRY_TEST_E5, see scripts/setup-models); empty for keyword only")
    ap.add_argument("--limit", type=int, default=0, help="only the first N answerable queries of each set")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=3600, help="seconds to wait for indexing/embedding per home")
    ap.add_argument("--home-root", help="keep the homes here (default: temporary, removed)")
    ap.add_argument("--reuse", action="store_true",
                    help="with --home-root: a home that holds the set already (names.json, written after "
                         "indexing, also by evidence.py) is asked again without indexing")
    ap.add_argument("--unrelated", type=int, default=100,
                    help="per unrelated set, this many of its questions asked at the default threshold")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--no-quarry", action="store_true", help="BM25 only")
    a = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    models = []
    for m in [x.strip() for x in a.models.split(",") if x.strip()]:
        if m not in MODELS:
            sys.exit(f"unknown model {m}; choose from {', '.join(MODELS)}")
        path = os.environ.get(MODELS[m][0])
        if not path or not Path(path).is_dir():
            sys.exit(f"{MODELS[m][0]} is not set to a model directory: eval \"$(bash scripts/setup-models)\"")
        models.append((m, path))
    if not a.no_quarry and not Path(a.quarry).is_file():
        sys.exit(f"quarry binary not found: {a.quarry}")
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python3", "eval/outside/run.py"] + sys.argv[1:])
    for set_name in [s.strip() for s in a.sets.split(",") if s.strip()]:
        set_dir = Path(a.data) / set_name
        if not (set_dir / "corpus.jsonl").is_file():
            sys.exit(f"{set_dir} has no corpus.jsonl: run eval/outside/prepare.py")
        meta = json.loads((set_dir / "meta.json").read_text(encoding="utf-8"))
        corpus, queries = load(set_dir, a.limit)
        unrelated = unrelated_queries(a.data, set_name, a.unrelated) if a.unrelated else []
        eprint(f"{set_name}: {len(corpus)} items, {len(queries)} queries, {len(unrelated)} unrelated")
        ranked, timing, rows = {}, {}, []
        t0 = time.monotonic()
        ranked["bm25"] = bm25_rankings(corpus, queries)
        timing["bm25"] = time.monotonic() - t0
        homes = [] if a.no_quarry else [("none", None)] + models
        for mname, mpath in homes:
            tmp = None
            names = None
            if a.home_root:
                home = Path(a.home_root) / f"{set_name}-{mname}"
                if a.reuse and (home / "names.json").is_file():
                    names = json.loads((home / "names.json").read_text(encoding="utf-8"))
                elif home.exists():
                    sys.exit(f"{home} exists: the harness wants a fresh home (remove it, pick another "
                             "--home-root, or --reuse one that names.json says is complete)")
            else:
                tmp = tempfile.TemporaryDirectory(prefix=f"quarry-outside-{set_name}-")
                home = tmp.name
            eprint(f" home {home} (model: {mname})")
            srv = Server(a.quarry, home, mpath)
            try:
                if names is not None:
                    srv.wait_ready(a.timeout)
                    if mpath is not None:
                        wait_embedded(srv, a.timeout)
                if names is None:
                    names, took = index(srv, set_name, corpus, mpath is not None, a.timeout)
                    timing[f"index/{mname}"] = took
                    if a.home_root:
                        (Path(home) / "names.json").write_text(json.dumps(names), encoding="utf-8")
                if mpath is None:
                    runs = [("keyword", "keyword", 0, TOP_K), ("default/none", None, None, 10)]
                else:
                    runs = [(f"vector/{mname}", "vector", 0, TOP_K), (f"hybrid/{mname}", "hybrid", 0, TOP_K),
                            (f"default/{mname}", None, None, 10), (f"keyword/{mname}", "keyword", 0, TOP_K)]
                t1 = time.monotonic()
                ranked.update(ask_all(srv, names, set_name, queries, runs, a.workers))
                defaults = [r for r in runs if r[0].startswith("default")]
                for lab, ids in ask_all(srv, names, set_name, unrelated, defaults, a.workers).items():
                    ranked[lab].update(ids)
                timing[f"queries/{mname}"] = time.monotonic() - t1
            finally:
                srv.stop()
                if tmp:
                    tmp.cleanup()
        label = {"bm25": ("plain BM25 (rank_bm25)", "—"), "keyword": ("Quarry keyword (`search`)", "—"),
                 "default/none": ("Quarry default, no model (keyword, min_score 0.5)", "—")}
        for m, _ in models:
            mn = MODELS[m][1]
            label[f"vector/{m}"] = ("Quarry vector (`vsearch`) = vector alone", mn)
            label[f"hybrid/{m}"] = ("Quarry hybrid (`query`)", mn)
            label[f"default/{m}"] = ("Quarry default (hybrid, min_score 0.5)", mn)
            label[f"keyword/{m}"] = ("Quarry keyword with a model configured", mn)
        order = ["bm25", "keyword", "default/none"] + [f"{k}/{m}" for m, _ in models
                                                        for k in ("vector", "hybrid", "default", "keyword")]
        summary = {}
        for k in order:
            if k in ranked:
                summary[k] = metrics(queries + (unrelated if k.startswith("default") else []), ranked[k],
                                     default=k.startswith("default"))
                rows.append((label[k][0], label[k][1], summary[k]))
        md = table(set_name, rows)
        by_kind = {}
        kinds = sorted({q.get("kind", "") for q in queries if q["answerable"]})
        if len(kinds) > 1:
            for kd in kinds:
                sub = [q for q in queries if q.get("kind", "") == kd]
                by_kind[kd] = {k: metrics(sub, ranked[k], default=k.startswith("default")) for k in order if k in ranked}
        header = (f"{set_name}: {len(corpus)} corpus items, {sum(q['answerable'] for q in queries)} answerable "
                  f"queries; {meta['repo']}@{meta['commit'][:12]}; run {started:%Y-%m-%d %H:%M} UTC on "
                  f"{cpu_model()}; `{command}`")
        print("\n" + header + "\n\n" + md + "\n", flush=True)
        (out_dir / f"{set_name}.md").write_text(header + "\n\n" + md + "\n", encoding="utf-8")
        result = {"set": set_name, "date": started.isoformat(timespec="seconds"), "cpu": cpu_model(),
                  "command": command, "quarry": a.quarry,
                  "quarry_mtime": (datetime.datetime.fromtimestamp(Path(a.quarry).stat().st_mtime).isoformat(
                      timespec="seconds") if Path(a.quarry).is_file() else None),
                  "source": {k: meta[k] for k in ("repo", "commit", "licence", "selection")},
                  "corpus": len(corpus), "queries": len(queries), "limit": a.limit,
                  "models": {m: MODELS[m][1] for m, _ in models}, "seconds": timing,
                  "summary": summary, "by_kind": by_kind,
                  "rankings": {k: {qid: ids[:10] for qid, ids in v.items()} for k, v in ranked.items()}}
        (out_dir / f"{set_name}.json").write_text(json.dumps(result, ensure_ascii=False, indent=None) + "\n",
                                                  encoding="utf-8")


if __name__ == "__main__":
    main()
