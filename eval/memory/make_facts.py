#!/usr/bin/env python3
"""Makes the memory benchmark's data (issue 44, item 5), deterministically.

Built like LongMemEval's knowledge-update and temporal-reasoning categories: facts about ten
services, written over simulated time (2026-01-05 .. 2026-11-20), most of them corrected
several times, some only true for a while (a maintenance window, a temporary door code).

Writes, next to this script:

- ``facts.jsonl``: one write per line, in the order written: ``key``, ``content``,
  ``valid_from`` (and ``valid_to`` for temporary facts), ISO dates.
- ``questions.jsonl``: ``question``, ``kind`` (``current``: the value now; ``as_of``: the value
  on ``date``; ``expired``: a temporary fact whose time is over — the right answer is none of
  its values), ``date`` (for ``as_of``), ``answer`` (the value the top result must state, or
  null) and ``stale`` (the key's other values: a top result stating one of them is wrong).
- ``pairs.jsonl``: labelled pairs of entry texts for the near-duplicate rule: ``a``, ``b``,
  ``duplicate`` (true only when ``b`` states the same fact as ``a`` in other words), ``kind``
  (``reworded``, ``same_words`` — the same sentence with ordering or punctuation changed —,
  ``updated`` — the same sentence with another value —, ``other_service``, ``other_attribute``).

    python3 eval/memory/make_facts.py
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 44
START = dt.date(2026, 1, 5)
END = dt.date(2026, 11, 20)

SERVICES = ["payments", "search", "billing", "checkout", "identity", "notifications",
            "reporting", "ingestion", "analytics", "storage"]

# attribute -> (values, write phrasings, reworded phrasings, question)
ATTRIBUTES = {
    "oncall": (
        ["Alice Novak", "Bruno Silva", "Chen Wei", "Dana Okafor", "Emil Berg", "Farah Haddad",
         "Goran Petrov", "Hana Sato", "Ivan Costa", "Jia Li"],
        ["The on-call engineer for the {s} service is {v}.",
         "{v} is the on-call engineer for the {s} service this rotation."],
        ["This week {v} carries the pager for {s}; page them first.",
         "Pages for {s} go to {v}, who is on call."],
        "Who is the on-call engineer for the {s} service?",
    ),
    "region": (
        ["eu-west-1", "us-east-2", "ap-southeast-1", "eu-central-1", "us-west-2", "sa-east-1"],
        ["The {s} service runs primarily in the {v} region.",
         "Primary region of the {s} service: {v}."],
        ["{s} is served mostly out of {v}.",
         "Most {s} traffic is handled in {v}."],
        "Which region does the {s} service run in?",
    ),
    "database": (
        ["PostgreSQL 13", "PostgreSQL 14", "PostgreSQL 15", "PostgreSQL 16", "PostgreSQL 17"],
        ["The {s} service database runs {v}.",
         "The database behind the {s} service is on {v}."],
        ["{s} stores its data in {v}.",
         "{v} is what the {s} database is running now."],
        "Which PostgreSQL version does the {s} service database run?",
    ),
    "team": (
        ["Falcon", "Otter", "Lynx", "Heron", "Badger", "Marten", "Puffin", "Ibex"],
        ["The {s} service is owned by the {v} team.",
         "Ownership of the {s} service sits with team {v}."],
        ["Team {v} maintains {s}.",
         "Questions about {s} go to the {v} team, its owners."],
        "Which team owns the {s} service?",
    ),
    "ratelimit": (
        ["120 requests per minute", "250 requests per minute", "400 requests per minute",
         "650 requests per minute", "900 requests per minute", "1500 requests per minute"],
        ["The {s} API rate limit is {v}.",
         "Clients of the {s} API are limited to {v}."],
        ["{s} API callers get at most {v}.",
         "Rate limiting on {s}: {v} per client."],
        "What is the rate limit of the {s} API?",
    ),
    "slo": (
        ["99.5 percent", "99.9 percent", "99.95 percent", "99.99 percent"],
        ["The availability target of the {s} service is {v}.",
         "The {s} service commits to {v} availability."],
        ["{s} aims to be up {v} of the time.",
         "Uptime objective for {s}: {v}."],
        "What is the availability target of the {s} service?",
    ),
}

TEMPORARY = [
    ("door", "The temporary door code for the {s} lab is {v}.", ["4417", "7302", "1958", "6624", "3081"],
     "What is the door code for the {s} lab?"),
    ("maintenance", "The {s} service is in a maintenance window until {v}.",
     ["Friday noon", "Monday 06:00", "the end of the sprint", "Thursday 18:00", "Sunday night"],
     "Is the {s} service in a maintenance window, and until when?"),
]


def iso(d: dt.date) -> str:
    return d.isoformat()


def main() -> None:
    rng = random.Random(SEED)
    span = (END - START).days
    facts: list[dict] = []
    questions: list[dict] = []
    pairs: list[dict] = []
    for s in SERVICES:
        for attr, (values, phrasings, reworded, question) in ATTRIBUTES.items():
            key = f"{s}.{attr}"
            n = rng.randint(4, 6)
            days = sorted(rng.sample(range(0, span), n))
            chosen: list[str] = []
            for _ in range(n):
                v = rng.choice([x for x in values if not chosen or x != chosen[-1]])
                chosen.append(v)
            versions = []
            for d, v in zip(days, chosen):
                when = START + dt.timedelta(days=d)
                text = rng.choice(phrasings).format(s=s, v=v)
                facts.append({"key": key, "content": text, "valid_from": iso(when), "value": v})
                versions.append((when, v))
            q = question.format(s=s)
            all_values = sorted(set(values))
            current = versions[-1][1]
            questions.append({"question": q, "kind": "current", "key": key, "answer": current,
                              "stale": [x for x in all_values if x != current]})
            for _ in range(2):
                at = versions[0][0] + dt.timedelta(days=rng.randint(0, (END - versions[0][0]).days))
                valid = [v for (w, v) in versions if w <= at][-1]
                questions.append({"question": q, "kind": "as_of", "date": iso(at), "key": key, "answer": valid,
                                  "stale": [x for x in all_values if x != valid]})
            # Labelled pairs: the first write against a rewording (same fact), the same
            # sentence reordered, the same sentence with another value, another service's and
            # another attribute's fact.
            v0 = chosen[0]
            a = phrasings[0].format(s=s, v=v0)
            pairs.append({"a": a, "b": rng.choice(reworded).format(s=s, v=v0), "duplicate": True, "kind": "reworded"})
            pairs.append({"a": a, "b": phrasings[1].format(s=s, v=v0), "duplicate": True, "kind": "same_words"})
            other_v = rng.choice([x for x in values if x != v0])
            pairs.append({"a": a, "b": phrasings[0].format(s=s, v=other_v), "duplicate": False, "kind": "updated"})
            other_s = rng.choice([x for x in SERVICES if x != s])
            pairs.append({"a": a, "b": phrasings[0].format(s=other_s, v=v0), "duplicate": False, "kind": "other_service"})
            other_attr = rng.choice([x for x in ATTRIBUTES if x != attr])
            ov, op, _, _ = ATTRIBUTES[other_attr]
            pairs.append({"a": a, "b": op[0].format(s=s, v=rng.choice(ov)), "duplicate": False, "kind": "other_attribute"})
    # Temporary facts: true for one to four weeks, then over; asked about now.
    for s in SERVICES:
        for name, phrasing, values, question in TEMPORARY:
            key = f"{s}.{name}"
            start = START + dt.timedelta(days=rng.randint(0, span - 40))
            end = start + dt.timedelta(days=rng.randint(7, 28))
            v = rng.choice(values)
            facts.append({"key": key, "content": phrasing.format(s=s, v=v), "valid_from": iso(start),
                          "valid_to": iso(end), "value": v})
            questions.append({"question": question.format(s=s), "kind": "expired", "key": key, "answer": None,
                              "stale": values})
            mid = start + (end - start) / 2
            questions.append({"question": question.format(s=s), "kind": "as_of", "date": iso(mid), "key": key,
                              "answer": v, "stale": [x for x in values if x != v]})
    # Written in the order things happened.
    facts.sort(key=lambda f: (f["valid_from"], f["key"]))
    for name, rows in (("facts", facts), ("questions", questions), ("pairs", pairs)):
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    corrected = len(facts) - len({f["key"] for f in facts})
    temporary = sum(1 for f in facts if "valid_to" in f)
    print(f"{len(facts)} facts ({corrected} corrections, {temporary} temporary), "
          f"{len(questions)} questions, {len(pairs)} pairs")


if __name__ == "__main__":
    main()
