"""The reference sharding method, as the 🤗 TPU language-modeling example does it (for comparison).

🤗 datasets `map` tokenizing with 2 processes, `group_texts` by list concatenation per 1,000
documents (dropping each group's remainder), one `tf.train.Example` per chunk, written with
`TFRecordWriter` into `dataset-<index>-<count>.tfrecord`. Usage:
    python benchmarks/reference_sharding.py TOKENIZER_DIR CORPUS.txt OUTPUT_DIR [MAX_LENGTH] [SHARD_SIZE]
Prints the seconds its work took, after the imports, as its last line.
"""

import os
import sys
import time
from itertools import chain


def main(tokenizer_dir: str, corpus: str, output_dir: str, max_length: int = 512, shard_size: int = 1000) -> None:
    import datasets
    import tensorflow as tf
    from transformers import AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    dataset = datasets.load_dataset("text", data_files=corpus, split="train")
    dataset = dataset.filter(lambda example: len(example["text"].strip()) > 0, num_proc=2)

    def tokenize(examples):
        return tokenizer(examples["text"])

    def group_texts(examples):
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total = len(concatenated["input_ids"]) // max_length * max_length
        return {k: [t[i:i + max_length] for i in range(0, total, max_length)] for k, t in concatenated.items()}

    tokenized = dataset.map(tokenize, batched=True, num_proc=2, remove_columns=["text"])
    grouped = tokenized.map(group_texts, batched=True, batch_size=1000, num_proc=2)

    os.makedirs(output_dir, exist_ok=True)
    for index, start in enumerate(range(0, len(grouped), shard_size)):
        snapshot = grouped[start:start + shard_size]
        count = len(snapshot["input_ids"])
        path = os.path.join(output_dir, f"dataset-{index}-{count}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(count):
                feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=snapshot[name][i]))
                           for name in ("input_ids", "attention_mask")}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    print(time.perf_counter() - started)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:6]))
