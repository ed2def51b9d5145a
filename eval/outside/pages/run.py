#!/usr/bin/env python3
"""Do wiki pages help search? (issue 68 item 4's measure) Hit@k with and without pages.

    python3 eval/outside/pages/run.py --quarry "$CARGO_TARGET_DIR/debug/quarry" \
        [--sets domainrag,locomo] [--models ""|minilm|e5] [--limit N] \
        [--home-root ~/.cache/quarry-outside/pages-homes]

Per set and per model (`none` = keyword only, QUARRY_EMBED_MODEL unset), on a fresh home:

1. the corpus is loaded exactly as eval/outside/run.py loads it (its `index`: one knowledge base
   per `group`, one Markdown file per item, `# title`, blank line, text);
2. run A: every query through `POST /api/v1/knowledge-search` (`keyword` without a model,
   `hybrid` with one; `min_score` 0, `top_k` 50);
3. pages are written through `PUT /api/v1/knowledge-bases/{kb}/pages/{slug}`, compiled
   deterministically (no language model): one `summary` page per group of related items (a
   LoCoMo session; a DomainRAG source title, split into parts of at most 50) whose body is a
   heading, one line made of each member's first sentence, and `[[links]]` to the neighbour
   pages and the index; it cites every member's first lines (`<knowledge_id>:1-N`). One
   `index` page per knowledge base links every summary page;
4. run B: the same queries, the same request, pages now in the knowledge base; scored
   strict (only raw documents count, pages keep their slots), with pages (a page counts as a
   hit for every document it cites) and raw-only (pages dropped from the list, then cut at k);
5. plain BM25 (eval/outside/run.py's `bm25_rankings`) on the corpus, and on the corpus plus the
   page texts, scored the same way.

Writes results/<set>.json and results/results.md (every set run so far).
"""
import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("outside_run", HERE.parent / "run.py")
R = importlib.util.module_from_spec(_spec)  # eval/outside/run.py: Server, index, upload, BM25, tokenizer
_spec.loader.exec_module(R)

KS = (1, 3, 5, 10)
TOP_K = 50
MAX_SOURCES = 50  # a page cites at most 50 passages (docs/wiki.md)
CITE_LINES = 4    # cite lines 1..N of each member: `# title`, blank, its first text lines


# --------------------------------------------------------------------------- pages

def first_sentence(text, limit=160):
    """The first sentence of an item's text, skipping a leading `日期：…` date line (DomainRAG)."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if len(lines) > 1 and re.match(r"^日期[:：]", lines[0]):
        lines = lines[1:]
    s = " ".join(lines)
    m = re.search(r"^.+?(?:[。！？!?]|\.(?=\s|$))", s)
    s = m.group(0) if m else s
    return s if len(s) <= limit else s[:limit].rstrip() + "…"


def page_groups(set_name, items):
    """Related items of one knowledge base: LoCoMo's session (its title names the speakers,
    session and date); otherwise items sharing a title (DomainRAG: the source page). A group
    larger than MAX_SOURCES is split into equal consecutive parts."""
    by = {}
    for c in items:
        by.setdefault(c["title"], []).append(c)
    out = []
    for title, members in by.items():
        parts = -(-len(members) // MAX_SOURCES)
        size = -(-len(members) // parts)
        for p in range(parts):
            chunk = members[p * size:(p + 1) * size]
            out.append((title if parts == 1 else f"{title} (part {p + 1} of {parts})", chunk))
    return out


def cite_range(c):
    """Lines 1..N of the uploaded `# title\\n\\ntext\\n`, N ≤ CITE_LINES, ending on a non-blank line."""
    lines = f"# {c['title']}\n\n{c['text']}\n".split("\n")[:CITE_LINES]
    n = len(lines)
    while n > 1 and not lines[n - 1].strip():
        n -= 1
    return 1, n


def compile_pages(set_name, items, kid_of):
    """-> [(slug, {title, body, type, sources}, [corpus ids cited])] for one knowledge base."""
    groups = page_groups(set_name, items)
    slugs = [f"p{i:04d}" for i in range(len(groups))]
    pages = []
    for i, (title, members) in enumerate(groups):
        summary = " ".join(first_sentence(c["text"]) for c in members)
        links = [s for s in (slugs[i - 1] if i else None, slugs[i + 1] if i + 1 < len(slugs) else None) if s]
        body = (f"# {title}\n\n{summary}\n\n"
                f"See also: {' · '.join(f'[[{s}]]' for s in links + ['index'])}\n")
        sources = []
        for c in members:
            a, b = cite_range(c)
            sources.append(f"{kid_of[c['id']]}:{a}-{b}")
        pages.append((slugs[i], {"title": title, "body": body, "type": "summary", "sources": sources},
                      [c["id"] for c in members]))
    body = "# Index\n\n" + "\n".join(f"- [[{s}]] {g[0]} ({len(g[1])} items)" for s, g in zip(slugs, groups)) + "\n"
    pages.append(("index", {"title": "Index", "body": body, "type": "index", "sources": []}, []))
    return pages


def write_pages(srv, names, set_name, corpus):
    """Writes every page; returns {kb: {slug: [cited corpus ids]}}, {kb: {slug: page text}}."""
    groups = R.groups_of(corpus)
    cites, texts = {}, {}
    for g, items in groups.items():
        kb = R.kb_name(set_name, g)
        code, body = srv.request("GET", f"/api/v1/knowledge-bases/{kb}/documents")
        if code != 200:
            sys.exit(f"listing {kb}: {code} {body}")
        kid_of = {names[kb][d["file_name"]]: d["id"] for d in body["data"] if d["file_name"] in names[kb]}
        if len(kid_of) != len(items):
            sys.exit(f"{kb}: {len(kid_of)} documents listed for {len(items)} items")
        cites[kb], texts[kb] = {}, {}
        for slug, page, cited in compile_pages(set_name, items, kid_of):
            code, out = srv.request("PUT", f"/api/v1/knowledge-bases/{kb}/pages/{slug}", page)
            if code not in (200, 201):
                sys.exit(f"writing page {kb}/{slug}: {code} {out}")
            cites[kb][slug] = cited
            texts[kb][slug] = page["title"] + "\n" + page["body"]
    return cites, texts


def wait_pages_indexed(srv, n_docs, n_pages, want_vectors, timeout):
    """Until the index holds every document and every page (`/status`'s `total_documents`) and
    the node is caught up (`/health/ready`), then until nothing waits for a vector."""
    t0 = time.monotonic()
    while True:
        code, st = srv.request("GET", "/status")
        have = st.get("total_documents", 0) if code == 200 else 0
        if have >= n_docs + n_pages:
            break
        if time.monotonic() - t0 > timeout:
            sys.exit(f"{have} of {n_docs + n_pages} documents and pages indexed after {timeout}s")
        time.sleep(1)
    srv.wait_ready(timeout)
    if want_vectors:
        R.wait_embedded(srv, timeout)
    return time.monotonic() - t0


# --------------------------------------------------------------------------- asking

def ask_all(srv, names, set_name, queries, mode, workers):
    """{qid: [unit]}; a unit is ("doc", corpus id) or ("page", slug), in rank order (a document's
    or page's rank is its best passage's)."""
    def ask(q):
        kb = R.kb_name(set_name, q.get("group", ""))
        body = {"query": q["query"], "knowledge_base_ids": [kb], "top_k": TOP_K, "search_mode": mode,
                "min_score": 0}
        code, out = srv.request("POST", "/api/v1/knowledge-search", body)
        if code != 200:
            raise RuntimeError(f"knowledge-search {body}: {code} {out}")
        units = []
        for r in out.get("results", []):
            if r.get("wiki_page"):
                u = ("page", r["wiki_page"]["slug"])
            else:
                fname = r.get("knowledge_filename") or Path(r.get("file") or "").name
                cid = names[kb].get(fname)
                if cid is None:
                    raise RuntimeError(f"result from an unknown file {fname!r} in {kb}")
                u = ("doc", cid)
            if u not in units:
                units.append(u)
        return q["id"], units

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            out = dict(pool.map(ask, queries))
        except RuntimeError as e:
            sys.exit(str(e))
    R.eprint(f"  {mode}: {len(queries)} queries in {time.monotonic() - t0:.1f}s")
    return out


# --------------------------------------------------------------------------- BM25 with pages

def bm25_units(corpus, queries, page_texts, set_name):
    """Plain BM25 (run.py's tokenizer and parameters) per group over the corpus, and over the
    corpus plus each page's title and body as one more item."""
    import jieba
    from rank_bm25 import BM25Okapi
    jieba.setLogLevel(60)
    plain, withp = {}, {}
    for g, items in R.groups_of(corpus).items():
        kb = R.kb_name(set_name, g)
        qs = [q for q in queries if q.get("group", "") == g]
        if not qs:
            continue
        units = [("doc", c["id"]) for c in items]
        toks = [R.tokenize(c["title"] + "\n" + c["text"]) for c in items]
        ptoks = [R.tokenize(t) for t in page_texts[kb].values()]
        punits = [("page", s) for s in page_texts[kb]]
        for out, us, ts in ((plain, units, toks), (withp, units + punits, toks + ptoks)):
            bm = BM25Okapi(ts)
            for q in qs:
                sc = bm.get_scores(R.tokenize(q["query"]))
                order = sorted(range(len(us)), key=lambda i: (-sc[i], us[i]))[:TOP_K]
                out[q["id"]] = [us[i] for i in order if sc[i] > 0]
    return plain, withp


# --------------------------------------------------------------------------- metrics

def score(queries, ranked, cites_of, how):
    """how: strict (pages keep their slots, only documents hit), pages (a page hits when it
    cites a relevant document), raw (pages dropped, then cut at k). Hit@k and MRR@10."""
    n = len(queries)
    hits = {k: 0 for k in KS}
    mrr = 0.0
    for q in queries:
        rel = set(q["relevant"])
        units = ranked.get(q["id"], [])
        if how == "raw":
            units = [u for u in units if u[0] == "doc"]
        flags = []
        for kind, x in units[:10]:
            if kind == "doc":
                flags.append(x in rel)
            else:
                flags.append(how == "pages" and bool(rel & set(cites_of(q, x))))
        first = next((i for i, f in enumerate(flags) if f), None)
        for k in KS:
            hits[k] += first is not None and first < k
        mrr += 1 / (first + 1) if first is not None else 0
    return {**{f"hit@{k}": hits[k] / n for k in KS}, "mrr@10": mrr / n, "queries": n}


def page_effects(queries, ranked_a, ranked_b, cites_of):
    """How pages change run B against run A."""
    n = len(queries)
    out = {}
    page_first = pages_in_top10 = cited_per_page_hit = page_hits = 0
    for q in queries:
        rel = set(q["relevant"])
        b = ranked_b.get(q["id"], [])[:10]
        pages_in_top10 += sum(u[0] == "page" for u in b)
        for kind, x in b:
            good = x in rel if kind == "doc" else bool(rel & set(cites_of(q, x)))
            if good:
                page_first += kind == "page"
                break
        for kind, x in b:
            if kind == "page" and rel & set(cites_of(q, x)):
                page_hits += 1
                cited_per_page_hit += len(cites_of(q, x))
    out["first_relevant_is_page@10"] = page_first / n
    out["pages_in_top10_mean"] = pages_in_top10 / n
    out["docs_cited_per_relevant_page_hit"] = cited_per_page_hit / page_hits if page_hits else 0.0
    for k in KS:
        lost_q = lost_docs = a_docs = 0
        raw_only = page_only = both = neither = 0
        for q in queries:
            rel = set(q["relevant"])
            a = {x for kind, x in ranked_a.get(q["id"], [])[:k] if kind == "doc"}
            bu = ranked_b.get(q["id"], [])[:k]
            b = {x for kind, x in bu if kind == "doc"}
            found_a = rel & a
            a_docs += len(found_a)
            lost_docs += len(found_a - b)
            lost_q += bool(found_a) and not (rel & b)
            r = bool(rel & b)
            p = any(kind == "page" and rel & set(cites_of(q, x)) for kind, x in bu)
            raw_only += r and not p
            page_only += p and not r
            both += r and p
            neither += not r and not p
        out[f"@{k}"] = {
            "queries_hit_in_A_lost_in_B": lost_q / n,
            "relevant_docs_in_A_pushed_out_in_B": lost_docs,
            "relevant_docs_in_A": a_docs,
            "answerable_from_raw_only": raw_only / n,
            "answerable_from_page_only": page_only / n,
            "answerable_from_both": both / n,
            "answerable_from_neither": neither / n,
        }
    return out


def md_tables(results):
    lines = []
    for res in results:
        s = res["set"]
        lines.append(f"### {s} — {res['corpus']} items, {res['pages']['summary_pages']} summary pages + "
                     f"{res['pages']['index_pages']} index page(s), {res['pages']['citations']} citations; "
                     f"{res['queries_scored']} queries{res['subsample_note']}")
        lines.append("")
        lines.append(f"Run {res['date']} on {res['cpu']}, `{res['command']}`.")
        lines.append("")
        lines.append("| row | model | Hit@1 | Hit@3 | Hit@5 | Hit@10 | MRR@10 |")
        lines.append("|---|---|---:|---:|---:|---:|---:|")
        for label, model, m in res["rows"]:
            lines.append(f"| {label} | {model} | " + " | ".join(f"{m[f'hit@{k}']:.3f}" for k in KS)
                         + f" | {m['mrr@10']:.3f} |")
        lines.append("")
        for mname, eff in res["effects"].items():
            lines.append(f"Pages in run B ({mname}): the first relevant unit of the top 10 is a page for "
                         f"{eff['first_relevant_is_page@10']:.1%} of queries; {eff['pages_in_top10_mean']:.2f} pages in "
                         f"an average top 10; a relevant page hit cites {eff['docs_cited_per_relevant_page_hit']:.1f} "
                         "documents on average.")
            lines.append("")
            lines.append("| k | A hit, B strict miss (queries) | relevant docs of A's top k pushed out in B | "
                         "answerable from raw only | from a page only | from both | from neither |")
            lines.append("|---:|---:|---:|---:|---:|---:|---:|")
            for k in KS:
                e = eff[f"@{k}"]
                lines.append(f"| {k} | {e['queries_hit_in_A_lost_in_B']:.3f} | {e['relevant_docs_in_A_pushed_out_in_B']} "
                             f"of {e['relevant_docs_in_A']} | {e['answerable_from_raw_only']:.3f} | "
                             f"{e['answerable_from_page_only']:.3f} | {e['answerable_from_both']:.3f} | "
                             f"{e['answerable_from_neither']:.3f} |")
            lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quarry", default=os.environ.get("QUARRY_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "quarry"))
    ap.add_argument("--data", default=str(HERE.parent / "data"))
    ap.add_argument("--sets", default="domainrag,locomo")
    ap.add_argument("--models", default="", help="comma list of minilm,e5 besides the keyword-only home")
    ap.add_argument("--no-keyword-home", action="store_true", help="only the model homes")
    ap.add_argument("--limit", type=int, default=0,
                    help="score only N answerable queries per set: the smallest sha1('pages:' + id)")
    ap.add_argument("--groups", default="", help="comma list: only these groups of a grouped set "
                    "(LoCoMo conversations), corpus and questions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--home-root", default=os.path.expanduser("~/.cache/quarry-outside/pages-homes"))
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stops `quarry serve` on the way out
    started = datetime.datetime.now(datetime.timezone.utc)
    command = " ".join(["python3", "eval/outside/pages/run.py"] + sys.argv[1:])
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    homes = ([] if a.no_keyword_home else [("none", None)])
    for m in models:
        path = os.environ.get(R.MODELS[m][0])
        if not path or not Path(path).is_dir():
            sys.exit(f"{R.MODELS[m][0]} is not set to a model directory")
        homes.append((m, path))
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for set_name in [s.strip() for s in a.sets.split(",") if s.strip()]:
        set_dir = Path(a.data) / set_name
        meta = json.loads((set_dir / "meta.json").read_text(encoding="utf-8"))
        corpus, queries = R.load(set_dir, 0)
        queries = [q for q in queries if q["answerable"]]
        if a.groups:
            keep_g = {g.strip() for g in a.groups.split(",")}
            corpus = [c for c in corpus if c.get("group", "") in keep_g]
            queries = [q for q in queries if q.get("group", "") in keep_g]
        total_q = len(queries)
        note = ""
        if a.limit and a.limit < total_q:
            keep = set(sorted((q["id"] for q in queries),
                              key=lambda i: hashlib.sha1(f"pages:{i}".encode()).hexdigest())[:a.limit])
            queries = [q for q in queries if q["id"] in keep]
            note = f" (of {total_q} answerable: the {a.limit} with the smallest sha1('pages:' + id))"
        if a.groups:
            note += f" (groups {a.groups} only)"
        R.eprint(f"{set_name}: {len(corpus)} items, {len(queries)} queries{note}")
        res_path = out_dir / f"{set_name}.json"
        prev = json.loads(res_path.read_text(encoding="utf-8")) if res_path.is_file() else {}
        ranked, cites, texts, timing = {}, None, None, {}
        for mname, mpath in homes:
            home = Path(a.home_root) / f"{set_name}-{mname}"
            if home.exists():
                shutil.rmtree(home)  # our own home root: always a fresh home
            R.eprint(f" home {home} (model: {mname})")
            srv = R.Server(a.quarry, home, mpath)
            try:
                names, took = R.index(srv, set_name, corpus, mpath is not None, a.timeout)
                timing[f"index/{mname}"] = took
                mode = "keyword" if mpath is None else "hybrid"
                ranked[f"A/{mname}"] = ask_all(srv, names, set_name, queries, mode, a.workers)
                t0 = time.monotonic()
                cites, texts = write_pages(srv, names, set_name, corpus)
                timing[f"pages_write/{mname}"] = time.monotonic() - t0
                timing[f"pages_indexed/{mname}"] = wait_pages_indexed(
                    srv, len(corpus), sum(len(v) for v in cites.values()), mpath is not None, a.timeout)
                R.eprint(f"  pages written in {timing[f'pages_write/{mname}']:.0f}s, searchable after "
                         f"{timing[f'pages_indexed/{mname}']:.0f}s more")
                ranked[f"B/{mname}"] = ask_all(srv, names, set_name, queries, mode, a.workers)
            finally:
                srv.stop()
        # the pages are compiled the same way in every home: BM25 over their texts
        if texts is None:
            sys.exit("no home was run")
        t0 = time.monotonic()
        ranked["bm25/A"], ranked["bm25/B"] = bm25_units(corpus, queries, texts, set_name)
        timing["bm25"] = time.monotonic() - t0

        def cites_of(q, slug):
            return cites[R.kb_name(set_name, q.get("group", ""))].get(slug, [])

        rows, summary, effects = [], {}, {}
        label_model = {"none": "—", "minilm": R.MODELS["minilm"][1], "e5": R.MODELS["e5"][1]}
        for mname, _ in homes:
            mode = "keyword" if mname == "none" else "hybrid"
            mod = label_model[mname]
            A, B = ranked[f"A/{mname}"], ranked[f"B/{mname}"]
            for key, lab, rk, how in (
                (f"A/{mname}", f"Quarry {mode}, A: without pages", A, "strict"),
                (f"B-strict/{mname}", f"Quarry {mode}, B strict: pages keep their slots, only documents count", B, "strict"),
                (f"B-pages/{mname}", f"Quarry {mode}, B with pages: a page counts for every document it cites", B, "pages"),
                (f"B-raw/{mname}", f"Quarry {mode}, B raw: pages dropped from the list, then cut", B, "raw"),
            ):
                summary[key] = score(queries, rk, cites_of, how)
                rows.append((lab, mod, summary[key]))
            effects[mname] = page_effects(queries, A, B, cites_of)
        for key, lab, rk, how in (
            ("bm25/A", "plain BM25, A: corpus", ranked["bm25/A"], "strict"),
            ("bm25/B-strict", "plain BM25, B strict: corpus + page texts", ranked["bm25/B"], "strict"),
            ("bm25/B-pages", "plain BM25, B with pages", ranked["bm25/B"], "pages"),
        ):
            summary[key] = score(queries, rk, cites_of, how)
            rows.append((lab, "—", summary[key]))
        effects["bm25"] = page_effects(queries, ranked["bm25/A"], ranked["bm25/B"], cites_of)
        n_pages = sum(len(v) for v in cites.values())
        n_index = len(cites)
        res = {"set": set_name, "date": started.isoformat(timespec="seconds"), "cpu": R.cpu_model(),
               "command": command, "quarry": a.quarry,
               "quarry_mtime": datetime.datetime.fromtimestamp(Path(a.quarry).stat().st_mtime).isoformat(
                   timespec="seconds"),
               "source": {k: meta[k] for k in ("repo", "commit", "licence")},
               "corpus": len(corpus), "queries_answerable": total_q, "queries_scored": len(queries),
               "subsample_note": note,
               "pages": {"summary_pages": n_pages - n_index, "index_pages": n_index,
                         "citations": sum(len(c) for v in cites.values() for c in v.values())},
               "seconds": timing, "summary": summary, "effects": effects, "rows": rows,
               "rankings": {k: {qid: [f"{u[0]}:{u[1]}" for u in us[:10]] for qid, us in v.items()}
                            for k, v in ranked.items()}}
        # a model pass run on its own keeps the keyword-only figures of an earlier run
        if prev and a.no_keyword_home and prev.get("queries_scored") == len(queries):
            for k, v in prev["summary"].items():
                res["summary"].setdefault(k, v)
            for k, v in prev["effects"].items():
                res["effects"].setdefault(k, v)
            res["rows"] = [r for r in prev["rows"] if r[1] == "—" and not r[0].startswith("plain")] + rows
            res["rankings"] = {**prev["rankings"], **res["rankings"]}
            res["seconds"] = {**prev["seconds"], **res["seconds"]}
            res["command"] = prev["command"] + " ; " + command
        res_path.write_text(json.dumps(res, ensure_ascii=False) + "\n", encoding="utf-8")
        print(md_tables([res]), flush=True)
    allres = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out_dir.glob("*.json"))]
    (out_dir / "results.md").write_text("# Do pages help search? — results\n\n" + md_tables(allres) + "\n",
                                        encoding="utf-8")


if __name__ == "__main__":
    main()
