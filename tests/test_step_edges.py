"""A run's step settings at their edges, trained for real: clipping at a limit no step reaches changes nothing, bit
for bit (an embedding's sparse gradient stays sparse), and a batch warm-up longer than the run says so at start."""

import numpy as np
import pytest

from conftest import MAX_LENGTH


def tiny_run(in_process, shards, tokenizer, output_dir, *flags):
    result = in_process("train", "--train-dataset", shards / "train", "--tokenizer", tokenizer, "--max-length",
                        MAX_LENGTH, "--model-config", "tiny", "--per-replica-batch-size", 8, "--max-steps", 4,
                        "--learning-rate", "1e-2", "--warmup-steps", 0, "--output-dir", output_dir, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


class NoDropout:
    def start_step(self, step, micro_batch=None):
        pass


def test_clipping_at_a_limit_no_step_reaches_trains_bit_for_bit_as_without_it():
    """A tiny RoBERTa masked LM (its position and type embeddings take sparse gradients, rows), 3 steps of the
    trainer's step with AdamW and weight decay: with --max-grad-norm 1e9 (never reached) the weights are those of the
    run without it, bit for bit, and no step is counted as clipped."""
    import tensorflow as tf
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.mlm.presets import PRESETS, masked_lm_config
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults
    from mlm_tpu.training.step import make_train_steps

    rng = np.random.default_rng(0)
    ids = rng.integers(5, 96, size=(8, 16)).astype(np.int32)
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids),
             "labels": np.where(rng.random(ids.shape) < 0.3, ids, -100).astype(np.int32)}
    model = TFAutoModelForMaskedLM.from_config(masked_lm_config(
        vocab_size=96, max_position_embeddings=20, hidden_dropout_prob=0, attention_probs_dropout_prob=0,
        **PRESETS["tiny"]))
    model.build_in_name_scope()
    start = model.get_weights()

    def trained(limit):
        model.set_weights(start)
        optimizer = make_optimizer(with_schedule_defaults(TrainingConfig("s", "o", learning_rate=1e-2,
                                                                         warmup_steps=0)), 10)
        steps = make_train_steps(tf.distribute.get_strategy(), model, optimizer, NoDropout(), max_grad_norm=limit)
        results = steps(iter(tf.data.Dataset.from_tensors(batch).repeat()), tf.constant(3)).numpy()
        return model.get_weights(), results

    plain, _ = trained(None)
    limited, results = trained(1e9)
    assert results[:, 5].tolist() == [0, 0, 0] and (results[:, 4] > 0).all()  # norms taken, none clipped
    different = [index for index, (got, expected) in enumerate(zip(limited, plain))
                 if not np.array_equal(got, expected)]
    assert not different, [float(np.abs(limited[index] - plain[index]).max()) for index in different]
    assert not np.array_equal(plain[0], start[0])  # it trained


@pytest.mark.slow
def test_a_batch_warmup_longer_than_the_run_says_so_at_start(in_process, shards, wikitext_tokenizer, tmp_path):
    """A global batch of 32 (4 micro-batches of 8) warming up from 8 over far more tokens than 4 steps see: every
    step trains 8 rows, and one line says so before the first."""
    result = tiny_run(in_process, shards, wikitext_tokenizer[0], tmp_path / "short", "--gradient-accumulation-steps",
                      4, "--batch-size-warmup-min-size", 8, "--batch-size-warmup-tokens", 1_000_000)
    line = next(line for line in result.stderr.splitlines() if "ends inside its batch warm-up" in line)
    assert "every step trains at 8 of 32 rows" in line and "its 4 steps end before step" in line, line
    assert result.stderr.index(line) < result.stderr.index("Batch-size warm-up: step 1 trains")
