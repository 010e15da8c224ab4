"""--mlm-probability-schedule and --eval-mlm-probability (mlm/masking.py): each phase masks its rate, validation
masks its own, the rate is a function of the step (a run resumed in phase 2 masks as the uninterrupted one did), and a
schedule that ends before the run is refused before anything is written."""

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error, run_train
from mlm_tpu.errors import UserError

SCHEDULE = ("0.3:4", "0.15:8", "0.05:12")  # mmBERT's rates, over a 12-step run


@pytest.fixture(scope="module")
def thousand_rows(wikitext_tokenizer, wikitext_path):
    """(tokenizer, 1,000 rows of 64 tokens packed from WikiText-2 as the shard command packs them)."""
    from test_masking import packed, paragraphs

    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, 3000), length=MAX_LENGTH)
    assert len(rows) >= 1000
    return tokenizer, rows[:1000]


def masked_share(tokenizer, rows, batch, of_every_token=False):
    """The share of the tokens that take a loss: of the maskable (non-special) ones, as 🤗's per-token masking draws
    them, or `of_every_token`, as BERT's whole-word and ELECTRA's budgets count a row."""
    counted = rows.size if of_every_token else (~np.isin(rows, tokenizer.all_special_ids)).sum()
    return (batch["labels"].numpy() != -100).sum() / counted


@pytest.mark.parametrize("masking, counted", [("token", False), ("token", True), ("whole-word", False)])
def test_each_phase_masks_its_rate_as_a_function_of_the_step(thousand_rows, masking, counted):
    from test_masking import as_batch

    from mlm_tpu.mlm.masking import Masking, masking_phases

    tokenizer, rows = thousand_rows
    schedule = masking_phases(SCHEDULE)
    words = Masking(mode=masking).word_starts(tokenizer)
    settings = dict(masking=masking, word_starts=words, counted_per_row=counted, schedule=schedule)

    def masker():
        from mlm_tpu.mlm.masking import MlmMasker

        return MlmMasker(tokenizer, 0.15, 7, None, **settings)

    uninterrupted = masker()
    for step, (rate, _) in zip((0, 3, 4, 7, 8, 11), [phase for phase in schedule for _ in (0, 1)]):
        batch = uninterrupted(step, as_batch(rows))
        assert abs(masked_share(tokenizer, rows, batch, counted or masking != "token") - rate) < 0.01, (step, rate)
    resumed = masker()(7, as_batch(rows))  # a new masker, as a run resumed at step 7 (phase 2) makes it
    np.testing.assert_array_equal(resumed["labels"].numpy(), uninterrupted(7, as_batch(rows))["labels"].numpy())


def test_without_a_schedule_the_masks_are_those_of_before(thousand_rows):
    """A schedule of one phase at the run's rate masks exactly what the one rate masks (the graph of before is kept
    for runs without one)."""
    from test_masking import as_batch

    from mlm_tpu.mlm.masking import MlmMasker

    tokenizer, rows = thousand_rows
    for counted in (False, True):
        plain = MlmMasker(tokenizer, 0.15, 3, None, counted_per_row=counted)(5, as_batch(rows[:50]))
        phased = MlmMasker(tokenizer, 0.15, 3, None, counted_per_row=counted, schedule=((0.15, 10),))(
            5, as_batch(rows[:50]))
        np.testing.assert_array_equal(plain["input_ids"].numpy(), phased["input_ids"].numpy())


def test_validation_masks_at_eval_mlm_probability(thousand_rows):
    from test_masking import as_batch

    from mlm_tpu.mlm.task import MaskedLmTask
    from mlm_tpu.tasks import TrainingConfig

    tokenizer, rows = thousand_rows
    task = MaskedLmTask("mlm")
    task._set_masking(TrainingConfig("s", "o", mlm_probability=0.3, eval_mlm_probability=0.15), tokenizer)
    for validation, rate in ((False, 0.3), (True, 0.15)):
        batch = task.make_masker(tokenizer, None, validation=validation)(11)(0, as_batch(rows))
        assert abs(masked_share(tokenizer, rows, batch) - rate) < 0.01, validation


def test_bad_schedules_are_refused():
    from mlm_tpu.mlm.masking import Masking, masking_phases
    from mlm_tpu.tasks import TrainingConfig

    for texts, phrase in ((("0.3",), "RATE:UNTIL"), (("1.5:10",), "between 0 and 1"),
                          (("0.3:10", "0.1:10"), "after the one before")):
        with pytest.raises(UserError, match=phrase):
            masking_phases(texts)
    with pytest.raises(UserError, match="token and whole-word"):
        Masking.of(TrainingConfig("s", "o", masking="span", mlm_probability_schedule=SCHEDULE))
    with pytest.raises(UserError, match="end at step 12, but the run has 20 steps"):
        Masking.of(TrainingConfig("s", "o", mlm_probability_schedule=SCHEDULE)).check_steps(20)


def test_a_schedule_that_ends_before_the_run_is_refused_and_nothing_is_written(in_process, shards,
                                                                              wikitext_tokenizer, tmp_path):
    output_dir = tmp_path / "out"
    result = in_process("train", "--train-dataset", shards / "train", "--tokenizer", wikitext_tokenizer[0],
                        "--model-config", "tiny", "--max-steps", "20", "--mlm-probability-schedule", *SCHEDULE,
                        "--output-dir", output_dir)
    assert_user_error(result, "--mlm-probability-schedule's phases end at step 12, but the run has 20 steps")
    assert not output_dir.exists()


@pytest.mark.slow
def test_a_run_killed_in_phase_2_resumes_with_phase_2s_rate_bit_for_bit(shards, wikitext_tokenizer, tmp_path):
    """With StableAdamW and a wsd schedule too: their state and rates come back from the backup as AdamW's do."""
    from test_resume import assert_same_run, resumed_at, train_and_kill_after_backup

    def flags(output_dir):
        return ["--train-dataset", shards / "train", "--tokenizer", wikitext_tokenizer[0], "--model-config", "tiny",
                "--max-steps", 12, "--per-replica-batch-size", 4, "--backup-steps", 3, "--logging-steps", 1,
                "--mlm-probability-schedule", *SCHEDULE, "--eval-mlm-probability", 0.2, "--optimizer", "stableadamw",
                "--lr-schedule", "wsd", "--decay-ratio", 0.25, "--learning-rate", 1e-3, "--output-dir", output_dir]

    uninterrupted = run_train(*flags(tmp_path / "uninterrupted"))
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert ("token masking of 30% until step 4, 15% until step 8, 5% until step 12 of tokens" in uninterrupted.stderr
            and "validation at 20%" in uninterrupted.stderr)
    assert ("Optimizer: stableadamw, wsd schedule (peak 0.001, warm-up 0.05 of the steps, held until step 9, then a "
            "1-sqrt decay over the last 3 steps to 0)") in uninterrupted.stderr
    train_and_kill_after_backup(flags(tmp_path / "resumed"), 6, tmp_path / "killed.log")
    resumed = run_train(*flags(tmp_path / "resumed"))
    assert resumed.returncode == 0 and resumed_at(resumed.stderr) == 6, resumed.stderr[-3000:]
    assert_same_run(tmp_path / "resumed", tmp_path / "uninterrupted")
