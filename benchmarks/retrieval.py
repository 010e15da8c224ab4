"""Retrieval judged downstream: does contrastive fine-tuning of an encoder mlm_tpu pretrained beat the same shape
fine-tuned from scratch, the encoder without fine-tuning (mean-pooled), BM25 on the same words and all-MiniLM-L6-v2 as
published, on the built-in inverse cloze task (`inverse-cloze-imdb`: an IMDB review's sentence as the query, the
review without it as the document; 2,000 training queries, 500 test queries against 2,500 documents)?

It runs `mlm-tpu downstream --tasks inverse-cloze-imdb` (mlm_tpu/downstream/retrieval.py) with a tiny CPU protocol:
texts cut to 64 tokens, 2 epochs of in-batch negatives at batch 32, learning rate 1e-3, seeds 1..3 (medians), and
prints its table (nDCG@10, recall@100, MRR@10 on the test queries, trec_eval's measures).

Usage: python benchmarks/retrieval.py --model FOLDER [--seeds 3] [--output-dir runs/retrieval]

FOLDER: a pretrained encoder with its tokenizer (a masked LM trained by `python train.py`, say). Runs finished in
--output-dir are read back, so an interrupted table resumes.
"""

import argparse

import mlm_tpu
from mlm_tpu.downstream.retrieval import table
from mlm_tpu.encoder.fine_tuning import FineTuningProtocol

PROTOCOL = FineTuningProtocol(max_length=64, num_epochs=2, learning_rate=1e-3, per_replica_batch_size=32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The pretrained encoder's folder.")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--output-dir", default="runs/retrieval")
    args = parser.parse_args()
    report = mlm_tpu.downstream_benchmark(args.model, tasks=("inverse-cloze-imdb",), seeds=args.seeds,
                                          baseline=("scratch", "reference"), output_dir=args.output_dir,
                                          protocol=PROTOCOL)
    print(table(report))


if __name__ == "__main__":
    main()
