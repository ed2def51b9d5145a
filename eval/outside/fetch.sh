#!/usr/bin/env bash
# Fetches the source files eval/outside/prepare.py reads, at the pinned commits, into DIR
# (DIR/<owner>__<name>/<path>); prepare.py then checks each against sources.sha256.
#   bash eval/outside/fetch.sh ~/.cache/quarry-outside/src
#   python3 eval/outside/prepare.py --src ~/.cache/quarry-outside/src
set -euo pipefail
dest=${1:?usage: fetch.sh DIR}
mkdir -p "$dest"
get() {  # repo commit path...
    local repo=$1 commit=$2; shift 2
    local dir="$dest/${repo/\//__}"
    if [ ! -d "$dir/.git" ]; then
        git init -q "$dir"
        git -C "$dir" remote add origin "https://github.com/$repo.git"
    fi
    git -C "$dir" fetch -q --depth 1 --filter=blob:none origin "$commit"
    git -C "$dir" checkout -q FETCH_HEAD -- "$@"
}
get fairyshine/Seal-Tools ce753ecd60ed08dd376984035de531ab8421f1c6 \
    Seal-Tools_Dataset/tool.jsonl Seal-Tools_Dataset/test_out_domain.jsonl LICENSE
get snap-research/LoCoMo 3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376 data/locomo10.json LICENSE.txt
get ShishirPatil/gorilla 6ea57973c7a6097fd7c5915698c54c17c5b1b6c8 LICENSE \
    data/api/huggingface_api.jsonl data/api/tensorflowhub_api.jsonl data/api/torchhub_api.jsonl \
    data/apibench/huggingface_eval.json data/apibench/tensorflow_eval.json data/apibench/torchhub_eval.json
get ShootingWong/DomainRAG f6ca1941a71ff19f6d73bd7588842bb92a6113e3 \
    BCM/labeled_data/extractive_qa/basic_qa.jsonl BCM/labeled_data/time-sensitive_qa/time_sensitive.jsonl \
    BCM/labeled_data/extractive_qa/basic_qa_retrieved_bm25.jsonl \
    BCM/labeled_data/extractive_qa/basic_qa_retrieved_dense.jsonl \
    BCM/labeled_data/time-sensitive_qa/time_sensitive_retrieved_bm25.jsonl \
    BCM/labeled_data/time-sensitive_qa/time_sensitive_retrieved_dense.jsonl
get HowieHwong/MetaTool 35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb LICENSE \
    dataset/plugin_des.json dataset/data/all_clean_data.csv dataset/data/multi_tool_query_golden.json
echo "fetched into $dest"
