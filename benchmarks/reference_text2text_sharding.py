"""The reference way to make T5 examples, as 🤗's run_summarization/translation examples do (for comparison).

🤗 datasets `map` with 2 processes: inputs `prefix + text` tokenized with truncation (head only)
and padding to max_length, targets with `text_target`, label padding replaced by -100; then one
`tf.train.Example` per row, written with `TFRecordWriter` into `dataset-<index>-<count>.tfrecord`.
Usage:
    python benchmarks/reference_text2text_sharding.py TOKENIZER_DIR ROWS.jsonl OUTPUT_DIR PREFIX MAX_LENGTH MAX_TARGET_LENGTH
The rows hold "title", "body" and "summary". Prints the seconds its work took, after the imports, as its last line.
"""

import os
import sys
import time


def main(tokenizer_dir: str, rows: str, output_dir: str, prefix: str, max_length: int, max_target_length: int,
         shard_size: int = 1000) -> None:
    import datasets
    import tensorflow as tf
    from transformers import AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    dataset = datasets.load_dataset("json", data_files=rows, split="train")

    def preprocess(examples):
        inputs = [f"{prefix} {title}\n{body}" for title, body in zip(examples["title"], examples["body"])]
        model_inputs = tokenizer(inputs, max_length=max_length, padding="max_length", truncation=True)
        labels = tokenizer(text_target=examples["summary"], max_length=max_target_length, padding="max_length",
                           truncation=True)
        model_inputs["labels"] = [[token if token != tokenizer.pad_token_id else -100 for token in label]
                                  for label in labels["input_ids"]]
        return model_inputs

    processed = dataset.map(preprocess, batched=True, num_proc=2, remove_columns=dataset.column_names)
    os.makedirs(output_dir, exist_ok=True)
    for index, start in enumerate(range(0, len(processed), shard_size)):
        snapshot = processed[start:start + shard_size]
        count = len(snapshot["input_ids"])
        with tf.io.TFRecordWriter(os.path.join(output_dir, f"dataset-{index}-{count}.tfrecord")) as writer:
            for i in range(count):
                feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=snapshot[name][i]))
                           for name in ("input_ids", "attention_mask", "labels")}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    print(time.perf_counter() - started)


if __name__ == "__main__":
    main(*sys.argv[1:5], *map(int, sys.argv[5:7]))
