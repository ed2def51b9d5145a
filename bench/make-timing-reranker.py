#!/usr/bin/env python3
"""Builds a cross-encoder directory with the exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2
(BERT, 6 layers, hidden 384, one relevance logit) from all-MiniLM-L6-v2's encoder plus a
randomly initialised classifier head.

No trained cross-encoder ships in any package registry reachable here, and the rerank
benchmark only needs the *cost* of a real one: same architecture, same sequence lengths, same
FLOPs. Its scores are meaningless, so it is for timing only (never for quality figures).

    python3 bench/make-timing-reranker.py MINILM_DIR OUT_DIR

Uses only the standard library (safetensors is a JSON header plus raw little-endian bytes).
"""

import json
import random
import shutil
import struct
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    weights = src / "model.safetensors"
    if not weights.is_file():
        sys.exit(f"{weights} not found: pass an all-MiniLM-L6-v2 directory")
    out.mkdir(parents=True, exist_ok=True)
    for name in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]:
        if (src / name).exists():
            shutil.copy(src / name, out / name)

    config = json.loads((src / "config.json").read_text())
    config["architectures"] = ["BertForSequenceClassification"]
    config["num_labels"] = 1
    config["id2label"] = {"0": "LABEL_0"}
    config["label2id"] = {"LABEL_0": 0}
    (out / "config.json").write_text(json.dumps(config, indent=2))

    raw = weights.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = bytearray(raw[8 + n :])
    hidden = config["hidden_size"]
    rng = random.Random(7)

    def add(name, shape, values):
        start = len(data)
        data.extend(struct.pack(f"<{len(values)}f", *values))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [start, len(data)]}

    add("classifier.weight", [1, hidden], [rng.gauss(0.0, 0.02) for _ in range(hidden)])
    add("classifier.bias", [1], [0.0])
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(data))
    print(out)


if __name__ == "__main__":
    main()
