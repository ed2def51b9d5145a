#!/usr/bin/env python3
"""Converts public retrieval sets nobody on the team wrote into eval/outside/data/<set>/.

    python3 eval/outside/prepare.py --src DIR [--sets seal-tools,locomo,gorilla,domainrag,metatool] [--out DIR]

DIR holds each source repository's files at their repository paths, under
`<owner>__<name>/` (what `eval/outside/fetch.sh DIR` writes: a clone at the pinned commit, or
only the files below exported from any copy of that commit). Every file read is checked
against the sha256 of SOURCES, so the output is the same bytes on every machine.

Output per set, one JSON object per line (UTF-8, keys sorted, ids stable):

    corpus.jsonl   {"id", "title", "text", ["lang"], ["group"]}
    queries.jsonl  {"id", "query", "relevant": [corpus ids], "answerable", ["group"], ["kind"]}
    meta.json      source repo, commit, files with sha256, licence, selection rule, counts
    LICENSE        (MetaTool only) the source's MIT notice, which must travel with copies

`group` (LoCoMo): a query is asked only of the corpus items of its own group (one
conversation = one memory). Stdlib only; deterministic (selection by sha1 of a stable key).
"""
import argparse
import csv
import hashlib
import io
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SOURCES = {
    "seal-tools": {
        "repo": "fairyshine/Seal-Tools",
        "commit": "ce753ecd60ed08dd376984035de531ab8421f1c6",
        "licence": "Apache-2.0 (LICENSE in the repository)",
        "commit_data": True,
        "files": {
            "Seal-Tools_Dataset/tool.jsonl": "",
            "Seal-Tools_Dataset/test_out_domain.jsonl": "",
        },
    },
    "locomo": {
        "repo": "snap-research/LoCoMo",
        "commit": "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376",
        "licence": "CC BY-NC 4.0 (LICENSE.txt in the repository): converted data is not committed here",
        "commit_data": False,
        "files": {"data/locomo10.json": ""},
    },
    "gorilla": {
        "repo": "ShishirPatil/gorilla",
        "commit": "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8",
        "licence": "Apache-2.0 (LICENSE in the repository)",
        "commit_data": True,
        "files": {
            "data/api/huggingface_api.jsonl": "",
            "data/api/tensorflowhub_api.jsonl": "",
            "data/api/torchhub_api.jsonl": "",
            "data/apibench/huggingface_eval.json": "",
            "data/apibench/tensorflow_eval.json": "",
            "data/apibench/torchhub_eval.json": "",
        },
    },
    "domainrag": {
        "repo": "ShootingWong/DomainRAG",
        "commit": "f6ca1941a71ff19f6d73bd7588842bb92a6113e3",
        "licence": "none stated (no LICENSE file; passages are pages of rdzs.ruc.edu.cn): converted data is not committed here",
        "commit_data": False,
        "files": {
            "BCM/labeled_data/extractive_qa/basic_qa.jsonl": "",
            "BCM/labeled_data/time-sensitive_qa/time_sensitive.jsonl": "",
            "BCM/labeled_data/extractive_qa/basic_qa_retrieved_bm25.jsonl": "",
            "BCM/labeled_data/extractive_qa/basic_qa_retrieved_dense.jsonl": "",
            "BCM/labeled_data/time-sensitive_qa/time_sensitive_retrieved_bm25.jsonl": "",
            "BCM/labeled_data/time-sensitive_qa/time_sensitive_retrieved_dense.jsonl": "",
        },
    },
    "metatool": {
        "repo": "HowieHwong/MetaTool",
        "commit": "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb",
        "licence": "MIT, Copyright (c) 2023 Yue Huang (LICENSE in the repository, copied beside the data)",
        "commit_data": True,
        "files": {
            "LICENSE": "",
            "dataset/plugin_des.json": "",
            "dataset/data/all_clean_data.csv": "",
            "dataset/data/multi_tool_query_golden.json": "",
        },
    },
}
SHA = HERE / "sources.sha256"  # "<sha256>  <owner>__<name>/<path>" per file


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)


def key(s):
    return hashlib.sha1(s.encode("utf-8")).hexdigest()


def read(src, name, rel, check):
    """Bytes of one source file, checked against sources.sha256 (recorded with --record)."""
    repo = SOURCES[name]["repo"].replace("/", "__")
    path = Path(src) / repo / rel
    if not path.is_file():
        sys.exit(f"{path} is missing: run eval/outside/fetch.sh {src}")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    want = check.get(f"{repo}/{rel}")
    if want and want != digest:
        sys.exit(f"{path}: sha256 {digest} is not the pinned {want}")
    SOURCES[name]["files"][rel] = digest
    return data


def lines(data):
    return [json.loads(x) for x in data.decode("utf-8").splitlines() if x.strip()]


# --------------------------------------------------------------------------- Seal-Tools

def seal_tools(src, check):
    tools = lines(read(src, "seal-tools", "Seal-Tools_Dataset/tool.jsonl", check))
    qs = lines(read(src, "seal-tools", "Seal-Tools_Dataset/test_out_domain.jsonl", check))
    corpus = []
    for t in tools:
        parts = [t["api_description"].strip(), f"Field: {t.get('field', '')}"]
        params = t.get("parameters") or {}
        if params:
            parts.append("Parameters:\n" + "\n".join(
                f"- {p} ({v.get('type', '')}): {v.get('description', '')}" for p, v in params.items()))
        resp = t.get("responses") or {}
        if resp:
            parts.append("Returns:\n" + "\n".join(
                f"- {p} ({v.get('type', '')}): {v.get('description', '')}" for p, v in resp.items()))
        corpus.append({"id": t["api_name"], "title": t["api_name"], "text": "\n\n".join(parts), "lang": "en"})
    ids = {c["id"] for c in corpus}
    queries = []
    for q in qs:
        rel = sorted({c["api"] for c in q["calling"]})
        assert all(r in ids for r in rel), q["id"]
        queries.append({"id": q["id"], "query": q["query"], "relevant": rel, "answerable": True,
                        "kind": q["id"].split("-")[1]})
    rule = ("all 4,076 tools of tool.jsonl (name as title; description, field, parameters and responses as "
            "text); all 654 questions of test_out_domain.jsonl, relevant = the set of APIs in `calling`")
    return corpus, queries, rule


# --------------------------------------------------------------------------- LoCoMo

def locomo(src, check):
    convs = json.loads(read(src, "locomo", "data/locomo10.json", check))
    corpus, queries = [], []
    dropped = 0
    for conv in convs:
        cid = conv["sample_id"]
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            when = c.get(f"session_{n}_date_time", "")
            for turn in c[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                corpus.append({"id": f"{cid}/{turn['dia_id']}", "group": cid, "lang": "en",
                               "title": f"{c['speaker_a']} and {c['speaker_b']}, session {n}, {when}",
                               "text": text})
            n += 1
        have = {x["id"] for x in corpus if x["group"] == cid}
        for i, q in enumerate(conv["qa"]):
            # evidence ids are written "D1:3"; a few are "D1:3; D1:5" or have stray spaces
            ev = []
            for e in q.get("evidence", []):
                for part in re.split(r"[;,]\s*", e):
                    part = part.strip()
                    if part and f"{cid}/{part}" in have and f"{cid}/{part}" not in ev:
                        ev.append(f"{cid}/{part}")
            if not ev:
                dropped += 1
                continue
            cat = q["category"]
            queries.append({"id": f"{cid}/q{i}", "group": cid, "query": q["question"], "relevant": ev,
                            # category 5 is adversarial: asks about something said by the other
                            # speaker or never said; its evidence turns are kept but it is not scored
                            "answerable": cat != 5,
                            "kind": {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                                     5: "adversarial"}[cat]})
    rule = (f"every dialogue turn of the 10 conversations is one corpus item (speaker: text, plus the "
            f"image caption when a photo is shared; title = speakers, session number and its date); every "
            f"question whose evidence names at least one existing turn ({dropped} dropped), relevant = its "
            f"evidence turns; category 5 (adversarial) kept with answerable=false; a query searches only "
            f"its own conversation (group)")
    return corpus, queries, rule


# --------------------------------------------------------------------------- Gorilla APIBench

GORILLA_QUERIES = 300


def gorilla(src, check):
    corpus, by_call = [], {}
    for hub, f in (("huggingface", "huggingface_api"), ("tensorflowhub", "tensorflowhub_api"), ("torchhub", "torchhub_api")):
        for i, a in enumerate(lines(read(src, "gorilla", f"data/api/{f}.jsonl", check))):
            cid = f"{hub}/{i}"
            text = [a.get("description", "").strip(),
                    f"Domain: {a.get('domain', '')}. Framework: {a.get('framework', '')}. "
                    f"Functionality: {a.get('functionality', '')}.",
                    f"API call: {a.get('api_call', '')}"]
            perf = a.get("performance")
            if isinstance(perf, dict) and perf.get("dataset"):
                text.append(f"Dataset: {perf['dataset']}")
            corpus.append({"id": cid, "title": str(a.get("api_name", "")), "text": "\n\n".join(t for t in text if t),
                           "lang": "en"})
            by_call.setdefault(a["api_call"], []).append(cid)
    pool = []
    for f in ("huggingface_eval", "tensorflow_eval", "torchhub_eval"):
        for i, e in enumerate(lines(read(src, "gorilla", f"data/apibench/{f}.json", check))):
            m = re.search(r"###Instruction:\s*(.*?)\s*(?:###Output|$)", e["code"], re.S)
            if not m or not m.group(1).strip():
                continue
            rel = by_call.get(e["api_call"], [])
            if not 1 <= len(rel) <= 3:
                continue
            pool.append({"id": f"{f}/{i}", "query": " ".join(m.group(1).split()), "relevant": rel,
                         "answerable": True, "kind": f.split("_")[0]})
    seen, uniq = set(), []
    for q in pool:
        if q["query"] not in seen:
            seen.add(q["query"])
            uniq.append(q)
    queries = sorted(uniq, key=lambda q: key("gorilla:" + q["id"]))[:GORILLA_QUERIES]
    queries.sort(key=lambda q: q["id"])
    rule = (f"all 1,726 APIs of data/api (api_name as title; description, domain, framework, functionality, "
            f"api_call, dataset as text); of the {len(pool)} eval instructions whose api_call matches 1-3 "
            f"corpus APIs (relevant = those, an api_call shared by more APIs is ambiguous and dropped), "
            f"duplicates removed, the {GORILLA_QUERIES} with the smallest sha1('gorilla:'+id)")
    return corpus, queries, rule


# --------------------------------------------------------------------------- DomainRAG

DOMAINRAG_CORPUS_MAX = 3000
HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef"


def unsegment(s):
    """The passages come segmented by spaces ("中国人民大学 文学院 的"): join Han runs back."""
    s = re.sub(rf"(?<=[{HAN}])[ \t]+(?=[{HAN}])", "", s)
    s = re.sub(r"[ \t]*\n[ \t]*", "\n", s)
    return s.strip()


def domainrag(src, check):
    passages = {}  # (url, psg_id or contents hash) -> item

    def pid(p):
        # by text: the retrieved lists carry no psg_id, and a positive found again must be the same item
        return key(unsegment(p.get("contents", "")))[:12]

    def add(p):
        i = pid(p)
        if i not in passages:
            text = unsegment(p.get("contents", ""))
            if p.get("date"):
                text = f"日期：{p['date']}\n{text}"
            passages[i] = {"id": i, "title": unsegment(p.get("title", "")), "text": text, "lang": "zh"}
        return i

    queries = []
    for task, f in (("extractive", "extractive_qa/basic_qa"), ("time-sensitive", "time-sensitive_qa/time_sensitive")):
        for i, q in enumerate(lines(read(src, "domainrag", f"BCM/labeled_data/{f}.jsonl", check))):
            pos = q.get("positive_reference") or q.get("positive_references") or []
            if isinstance(pos, dict):
                pos = [pos]
            rel = sorted({add(p) for p in pos if p.get("contents")})
            if rel:
                queries.append({"id": f"{task}/{i}", "query": unsegment(q["question"]), "relevant": rel,
                                "answerable": True, "kind": task})
    positives = set(passages)
    # distractors: the passages the set's own BM25 and dense retrievers returned for these questions
    distract = {}
    for f in ("extractive_qa/basic_qa", "time-sensitive_qa/time_sensitive"):
        for r in ("bm25", "dense"):
            for q in lines(read(src, "domainrag", f"BCM/labeled_data/{f}_retrieved_{r}.jsonl", check)):
                for p in q.get("retrieved_psgs") or []:
                    if isinstance(p, dict) and p.get("contents"):
                        distract.setdefault(pid(p), p)
    extra = sorted((i for i in distract if i not in positives), key=lambda i: key("domainrag:" + i))
    for i in extra[:max(0, DOMAINRAG_CORPUS_MAX - len(positives))]:
        add(distract[i])
    rule = (f"questions of extractive_qa/basic_qa and time-sensitive_qa/time_sensitive, relevant = their "
            f"positive passages ({len(positives)}); distractors = the passages the set's own BM25 and dense "
            f"retrievers returned for the same questions ({len(distract)} distinct), the ones with the "
            f"smallest sha1('domainrag:'+id) up to {DOMAINRAG_CORPUS_MAX} passages in all; spaces between Han "
            f"characters (the source is pre-segmented) removed")
    return list(passages.values()), queries, rule


# --------------------------------------------------------------------------- MetaTool (ToolE)

METATOOL_SINGLE = 400
METATOOL_MULTI = 100


def metatool(src, check):
    # MIT asks for its notice in every copy: written as data/metatool/LICENSE by write()
    SOURCES["metatool"]["licence_text"] = read(src, "metatool", "LICENSE", check)
    des = json.loads(read(src, "metatool", "dataset/plugin_des.json", check))
    corpus = [{"id": name, "title": name, "text": " ".join(d.split()), "lang": "en"} for name, d in des.items()]
    ids = set(des)
    data = read(src, "metatool", "dataset/data/all_clean_data.csv", check).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(data, newline="")))
    multi = json.loads(read(src, "metatool", "dataset/data/multi_tool_query_golden.json", check))
    # the same query text may occur more than once; with one tool it is kept once (first row),
    # with different tools the labels disagree and every copy is dropped
    labels, first = {}, {}
    for i, r in enumerate(rows):
        text = " ".join(r["Query"].split())
        if not text:
            continue
        labels.setdefault(text, set()).add(r["Tool"].strip())
        first.setdefault(text, i)
    single, conflicting, unknown = [], 0, 0
    for text, i in first.items():
        tools = labels[text]
        if len(tools) > 1:
            conflicting += 1
            continue
        if not tools <= ids:
            unknown += 1
            continue
        single.append({"id": f"single/{i}", "query": text, "relevant": sorted(tools), "answerable": True,
                       "kind": "single"})
    pool_multi, seen = [], set(first)
    for i, m in enumerate(multi):
        text = " ".join(m["query"].split())
        tools = sorted({t.strip() for t in m["tool"]})
        if not text or text in seen:
            continue
        seen.add(text)
        if not tools or not set(tools) <= ids:
            unknown += 1
            continue
        pool_multi.append({"id": f"multi/{i}", "query": text, "relevant": tools, "answerable": True,
                           "kind": "multi"})
    queries = (sorted(single, key=lambda q: key("metatool:" + q["id"]))[:METATOOL_SINGLE]
               + sorted(pool_multi, key=lambda q: key("metatool:" + q["id"]))[:METATOOL_MULTI])
    queries.sort(key=lambda q: (q["kind"] != "single", int(q["id"].split("/")[1])))
    rule = (f"all {len(corpus)} tools of plugin_des.json (tool name as title, its description as text); "
            f"queries: of the {len(rows)} rows of all_clean_data.csv (one tool each) the {len(single)} distinct "
            f"query texts ({conflicting} texts labelled with different tools dropped, duplicates kept once), "
            f"the {METATOOL_SINGLE} with the smallest sha1('metatool:single/'+row), and of the {len(multi)} "
            f"queries of multi_tool_query_golden.json (two tools each) the {METATOOL_MULTI} with the smallest "
            f"sha1('metatool:multi/'+index); relevant = the labelled tool(s); {unknown} queries whose label "
            f"names no tool of plugin_des.json dropped")
    return corpus, queries, rule


CONVERTERS = {"seal-tools": seal_tools, "locomo": locomo, "gorilla": gorilla, "domainrag": domainrag,
              "metatool": metatool}


def dedupe(corpus, queries):
    """Items with the same title and text are one (Quarry keeps one document per identical upload)."""
    first, keep, alias = {}, [], {}
    for c in corpus:
        k = (c.get("group", ""), c["title"], c["text"])
        if k in first:
            alias[c["id"]] = first[k]
        else:
            first[k] = c["id"]
            keep.append(c)
    for q in queries:
        rel = []
        for r in q["relevant"]:
            r = alias.get(r, r)
            if r not in rel:
                rel.append(r)
        q["relevant"] = rel
    return keep, queries, len(alias)


def write(out, name, corpus, queries, rule):
    corpus, queries, merged = dedupe(corpus, queries)
    if merged:
        rule += f"; {merged} items identical in title and text to an earlier one merged into it (ids of the first)"
    d = Path(out) / name
    d.mkdir(parents=True, exist_ok=True)
    for fname, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        with open(d / fname, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    s = SOURCES[name]
    meta = {"set": name, "repo": s["repo"], "commit": s["commit"], "licence": s["licence"],
            "files_sha256": s["files"], "selection": rule, "corpus": len(corpus), "queries": len(queries),
            "answerable": sum(q["answerable"] for q in queries), "committed": s["commit_data"]}
    (d / "meta.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if s.get("licence_text"):
        (d / "LICENSE").write_bytes(s["licence_text"])
    size = sum((d / f).stat().st_size for f in ("corpus.jsonl", "queries.jsonl"))
    eprint(f"{name}: {len(corpus)} corpus items, {len(queries)} queries ({meta['answerable']} answerable), "
           f"{size / 1e6:.2f} MB -> {d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="folder with <owner>__<name>/<path> of the source files")
    ap.add_argument("--sets", default=",".join(CONVERTERS))
    ap.add_argument("--out", default=str(HERE / "data"))
    ap.add_argument("--record", action="store_true", help="write the sha256 of what was read to sources.sha256")
    a = ap.parse_args()
    check = {}
    if SHA.is_file() and not a.record:
        for line in SHA.read_text().splitlines():
            if line.strip():
                h, p = line.split(None, 1)
                check[p.strip()] = h
    names = [s.strip() for s in a.sets.split(",") if s.strip()]
    for n in names:
        if n not in CONVERTERS:
            sys.exit(f"unknown set {n}; choose from {', '.join(CONVERTERS)}")
        write(a.out, n, *CONVERTERS[n](a.src, check))
    if a.record:
        old = {}
        if SHA.is_file():
            for line in SHA.read_text().splitlines():
                if line.strip():
                    h, p = line.split(None, 1)
                    old[p.strip()] = h
        for n in names:
            repo = SOURCES[n]["repo"].replace("/", "__")
            for rel, h in SOURCES[n]["files"].items():
                if h:
                    old[f"{repo}/{rel}"] = h
        SHA.write_text("".join(f"{h}  {p}\n" for p, h in sorted(old.items())))


if __name__ == "__main__":
    main()
