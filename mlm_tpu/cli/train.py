"""`python train.py` (also `mlm-tpu train`): train a model on TFRecord shards, on a TPU, every GPU or the CPU.

--task mlm (default): pretrain RoBERTa from scratch on masked-LM shards; --task electra: an ELECTRA generator and
discriminator on the same shards, by replaced-token detection. --task classification |
generation: fine-tune T5 (a preset from scratch, or --model-name-or-path) on text-to-text shards,
scored on the validation shards each epoch; the output folder keeps the best epoch. --task
sequence-classification | token-classification: the same for an encoder (--model-name-or-path: BERT,
RoBERTa, ELECTRA..., one mlm_tpu pretrained; or a RoBERTa shape from scratch) with a head, on labelled
shards.

A run can be written down and replayed: --config FILE (JSON or YAML) takes its settings from the
file (the flags' names with underscores; see configs/), and flags given as well override it. The
training_args.json of every run is such a file. A preempted run resumes from its backup, exactly
where it stopped, when started again with the same command. Flags follow the 🤗 TPU
language-modeling example; dashes and underscores are both accepted.
"""

import argparse
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_hardware_flags, add_masking_flags, add_verbose_flag
from mlm_tpu.configuration import read_config_file
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.electra.presets import PRESETS as ELECTRA_PRESETS
from mlm_tpu.mlm.presets import PRESETS
from mlm_tpu.t5.presets import PRESETS as T5_PRESETS
from mlm_tpu.tasks import TASKS, task_from_head
from mlm_tpu.training.config import MAX_SEED, OPTIMIZERS, SCHEDULES, TrainingConfig
from mlm_tpu.training.cluster import check_cluster

FLAGS = ConfigFlags(TrainingConfig)
RUN_INFO_KEY = "run"  # what training_args.json records of the run beside its settings; not a setting


def _rate(text: str):
    """A --mixture-rates value: a number, or the word 'examples' (checked with the others later)."""
    try:
        return float(text)
    except ValueError:
        return text


def build_parser(prog: str = "python train.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--config", default=None, metavar="FILE",
             help="Take the settings from this JSON or YAML file (a run's training_args.json, or one of configs/); "
                  "flags given as well override it.")
    hardware = add_hardware_flags(FLAGS, parser)
    FLAGS.add(hardware, "--jit-compile", action=argparse.BooleanOptionalAction,
              help="Compile each replica's training step (forward and backward pass) with XLA (default: on with GPUs, "
                   "off on CPUs, where it measured slower; TPUs compile everything anyway).")
    FLAGS.add(hardware, "--steps-per-execution", type=int,
              help="Training steps per call into the device (default: 1; 100s suit TPUs); --backup-steps must be a "
                   "multiple of it.")
    FLAGS.add(hardware, "--peak-tflops", type=float,
              help="The peak TFLOP/s of each replica's device (a chip; on TPU v2 and v3, one of its two cores), that "
                   "the logs' MFU divides the model's FLOPs per second by (default: TPU v2-v6e, A100, H100, H200 and "
                   "L4 are known by name, in bfloat16; on other devices, CPUs among them, MFU is unknown).")
    FLAGS.add(hardware, "--communication", choices=("auto", "ring", "nccl"), field="hardware.communication",
              help="Several workers (TF_CONFIG names more than one task; see `mlm-tpu launch`): how they all-reduce "
                   "gradients, ring (gRPC, any device), nccl (GPUs) or auto (default: auto).")
    FLAGS.add(hardware, "--cluster-start-timeout", type=float, metavar="SECONDS",
              field="hardware.cluster_start_timeout",
              help="Several workers: how long each waits for all the others to start before naming the missing ones "
                   "(default: 300).")

    task = parser.add_argument_group("task")
    FLAGS.add(task, "--task", choices=TASKS,
              help="mlm: pretrain RoBERTa with masked-LM on masked-LM shards (default). electra: pretrain an ELECTRA "
                   "generator (a small masked LM) and discriminator (which tells every token the generator replaced "
                   "from the originals) on the same shards; the output folder holds the discriminator, generator/ the "
                   "generator; scored by both models' loss and accuracy and the replaced tokens' precision and "
                   "recall. classification: T5 predicts "
                   "one class token per example, scored by accuracy and per-class precision/recall/F1. generation: T5 "
                   "writes free text with XLA-compiled generate, scored by exact match, token F1 and ROUGE-1/2/L. "
                   "Both T5 tasks train on text-to-text shards (`python -m mlm_tpu.shard --task text2text`). "
                   "span-corruption: pretrain T5 with T5's objective on raw rows (`python -m mlm_tpu.shard --task "
                   "span-corruption`), corrupted afresh each batch with the noise settings the shards' manifest "
                   "records; scored by target loss, perplexity and token accuracy. sequence-classification: an "
                   "encoder with a head predicts each text's (or pair's) class, or score; scored by accuracy, macro F1 "
                   "and Matthews correlation (Pearson and Spearman for scores). token-classification: a tag per word, "
                   "scored by entity precision/recall/F1 (seqeval). Both train on labelled shards (`python -m "
                   "mlm_tpu.shard --task sequence-classification|token-classification`).")
    add_flag(task, "--head", choices=("mlm", "t5"), default=None,
             help="The old spelling: mlm is --task mlm; t5 goes with --task classification or generation.")
    add_masking_flags(FLAGS, task, "--task mlm and electra", "0.15; ELECTRA-Large's paper run: 0.25")
    FLAGS.add(task, "--dense-mlm-head", action="store_true",
              help="--task mlm (and electra's generator): run the masked-LM head at every position, as before, rather "
                   "than at the masked positions only (the sparse head, the default: the same loss, the head's work "
                   "saved at the other positions). For comparison; the saved model is the same kind either way.")
    FLAGS.add(task, "--max-predictions-per-seq", type=int, metavar="SLOTS",
              help="--task mlm and electra, sparse head: prediction slots per row (BERT's max_predictions_per_seq). A "
                   "row with more masked positions keeps this many, drawn at random, and leaves the others unmasked; "
                   "each epoch's log line counts them (default: the fewest slots a row outgrows with probability "
                   "below 1e-6 at --mlm-probability, e.g. 41 of 128 positions at 0.15). With --masking whole-word or "
                   "span, rows mask at most this many, never part of a word (default: a full row's share at "
                   "--mlm-probability, and 4 for the word that crosses it: 23 of 128 at 0.15).")
    FLAGS.add(task, "--generator-size-ratio", type=float, metavar="RATIO",
              help="--task electra: the generator's hidden size as a share of the discriminator's, in (0, 1]; its "
                   "feed-forward is 4x that, a head per 64 units (default: the preset's, the paper's 1/4 for "
                   "electra-small and -large, 1/3 for electra-base, 1/2 for electra-tiny; 1/4 for a config.json).")
    FLAGS.add(task, "--discriminator-weight", type=float, metavar="LAMBDA",
              help="--task electra: the loss is the generator's masked-LM loss + LAMBDA x the discriminator's binary "
                   "cross-entropy over every real token (default: 50, the paper's).")
    FLAGS.add(task, "--labels", nargs="+", metavar="LABEL",
              help="Classification: the class names, each one token of the tokenizer (default: the targets the "
                   "training shards' manifest counted).")
    FLAGS.add(task, "--max-new-tokens", type=int,
              help="Generation: tokens generated per example in validation (default: the shards' target length).")
    FLAGS.add(task, "--metric-for-best-model",
              help="T5 and encoder tasks with --eval-dataset: the validation score whose best epoch the output "
                   "folder keeps (classification: accuracy (default), macro_f1; generation: exact_match, f1, rouge1, "
                   "rouge2, rougeL (default); sequence-classification: accuracy (default), macro_f1, "
                   "matthews_correlation, f1 (two classes), loss, or for scores pearson (default), spearman, loss; "
                   "token-classification: f1 (default), precision, recall, accuracy, loss). Encoder tasks also take "
                   "several, comma-separated: their mean decides (GLUE's MRPC score: f1,accuracy).")

    data = parser.add_argument_group("data")
    FLAGS.add(data, "--train-dataset", nargs="+", metavar="FOLDER",
              help="Folder (local or gs://) of training shards (required); several: a mixture, each example drawn "
                   "from one of them at --mixture-rates, by (seed, step).")
    FLAGS.add(data, "--mixture-rates", nargs="+", type=_rate, metavar="RATE",
              help="With several --train-dataset folders: each one's share of the examples, in the same order "
                   "(normalised to sum to 1), or 'examples' for shares proportional to their sizes (SeqIO's "
                   "rate_num_examples; the default).")
    FLAGS.add(data, "--mixture-maximum", type=int, metavar="K",
              help="With --mixture-rates examples: a member of more than K examples counts as K (SeqIO's maximum; T5's "
                   "examples-proportional mixing with limit K), so a huge member does not crowd out the others "
                   "(default: no limit).")
    FLAGS.add(data, "--mixture-temperature", type=float,
              help="With --mixture-rates examples: each size (after --mixture-maximum) raised to 1/T before sharing, "
                   "T > 1 flattening the shares (default: 1).")
    FLAGS.add(data, "--eval-dataset", help="Folder of validation shards, scored each epoch.")
    FLAGS.add(data, "--tokenizer", "--tokenizer-name-or-path",
              help="The tokenizer the shards were made with (folder or Hub name); for T5 tasks it defaults to "
                   "--model-name-or-path's.")
    FLAGS.add(data, "--max-length", type=int,
              help="Tokens per example (per input, for T5), checked against the shards (default: what they hold).")
    FLAGS.add(data, "--max-target-length", type=int,
              help="T5 text-to-text: tokens per target, checked against the shards (default: what they hold).")
    FLAGS.add(data, "--shuffle-buffer-size", type=int,
              help="Records shuffled together: each epoch the files are put in a new order and read one after the "
                   "other, and the records shuffled within windows of this many, shared among the input pipelines "
                   "(default: 262144).")
    FLAGS.add(data, "--input-pipelines", type=int, metavar="V",
              help="The data order is defined over V virtual input pipelines, each reading its own of V equal parts "
                   "of the records (the shards one after the other) and giving each step global batch / V examples, "
                   "so it is the same on any number of workers, replicas or TPU hosts that divides V; recorded in "
                   "training_args.json, and a resumed run keeps its backup's. V must divide the global batch and be "
                   "at most the number of shards, with several --train-dataset folders those of the folder with "
                   "fewest, as each pipeline reads its part of each (default: the largest such V up to 64).")
    FLAGS.add(data, "--pack", action="store_true",
              help="classification, generation: put several training examples in each row (inputs after inputs, "
                   "targets after targets; each attends only to itself through block-diagonal masks), so short "
                   "examples do not train on padding. Validation stays one example per row. Its steps per epoch are "
                   "counted by packing the training set once, and kept (in the backup, and in $MLM_TPU_CACHE, default "
                   "~/.cache/mlm_tpu) for resumes and later runs on the same shards and settings.")
    FLAGS.add(data, "--seed", type=int,
              help=f"Seed of weights, data order, masks and dropout, 0 to {MAX_SEED} (default: 42).")

    model = parser.add_argument_group("model and optimisation")
    FLAGS.add(model, "--model-config", "--pretrained-model-config",
              help=f"Train from scratch with this shape: a preset ({', '.join(PRESETS)}; base is roberta-base's "
                   f"shape; for --task electra, the discriminator's: {', '.join(ELECTRA_PRESETS)}, the paper's shapes; "
                   f"for T5 tasks: {', '.join(T5_PRESETS)}), a config.json, or a Hub model name; vocabulary and "
                   "positions are fitted to the tokenizer (default: base, electra-base for --task electra, t5-small "
                   "for T5 tasks).")
    FLAGS.add(model, "--config-overrides",
              help="Changes to that shape, as the 🤗 example scripts take them: name=value pairs, comma separated, e.g. "
                   "hidden_dropout_prob=0,num_hidden_layers=4.")
    FLAGS.add(model, "--model-name-or-path",
              help="T5 tasks: start from these pretrained weights instead (a save_pretrained folder, or a Hub name "
                   "such as t5-small or google/t5-v1_1-base); encoder tasks: the pretrained encoder (a folder mlm_tpu "
                   "made, or roberta-base, bert-base-uncased, ...), its head new; with --delta (any task), the frozen "
                   "base model.")
    FLAGS.add(model, "--per-replica-batch-size", type=int, help="Examples per replica per step (default: 8).")
    FLAGS.add(model, "--num-epochs", type=int, help="Passes over the training shards (default: 1).")
    FLAGS.add(model, "--max-steps", type=int, help="Stop after this many steps in all (default: the epochs').")
    FLAGS.add(model, "--optimizer", choices=OPTIMIZERS,
              help="adamw: AdamW with decoupled weight decay (default). adafactor: Adafactor as T5X runs it (second "
                   "moments factored into row and column means, no first moment, decay rate 0.8, updates clipped to "
                   "RMS 1.0, steps scaled by each weight's RMS, relative step size off: the rate is the schedule's); "
                   "its state is a small fraction of AdamW's (the log says how many bytes at start).")
    FLAGS.add(model, "--lr-schedule", choices=SCHEDULES,
              help="linear: warm up from 0, then decay linearly to 0 at the last step (default). rsqrt: T5's inverse "
                   "square root: --learning-rate for --warmup-steps steps, then --learning-rate x sqrt(warm-up / "
                   "step); with neither given, T5's: 0.01 for 10,000 steps, then 1/sqrt(step). T5X's gin files give "
                   "it as a base rate: see --base-learning-rate.")
    FLAGS.add(model, "--learning-rate", type=float,
              help="Peak learning rate (default: 0.0001 with --lr-schedule linear; 1/sqrt(--warmup-steps) with rsqrt, "
                   "0.01 for T5's 10,000). With rsqrt, at most 0.1: a larger value is T5X's base, --base-learning-rate.")
    FLAGS.add(model, "--base-learning-rate", type=float, metavar="BASE",
              help="--lr-schedule rsqrt as T5X's gin files give it (factors 'constant * rsqrt_decay', "
                   "base_learning_rate = 1.0): the rate is BASE / sqrt(max(step, --warmup-steps)), so its peak, "
                   "held while warming up, is BASE / sqrt(warm-up): --base-learning-rate 1 with 10,000 warm-up steps "
                   "is T5's 0.01 then 1/sqrt(step). Instead of --learning-rate (default: none).")
    FLAGS.add(model, "--weight-decay-rate", type=float, help="AdamW's weight decay; Adafactor has none (default: 0.001).")
    FLAGS.add(model, "--adam-beta1", type=float, help="AdamW's first-moment decay; Adafactor has none (default: 0.9).")
    FLAGS.add(model, "--adam-beta2", type=float,
              help="AdamW's second-moment decay; Adafactor's is T5X's 1 - step^-0.8 (default: 0.999).")
    FLAGS.add(model, "--adam-epsilon", type=float,
              help="AdamW's epsilon, added to the root of the second moment: the larger, the smaller the steps of "
                   "weights whose gradients are tiny (default: 1e-08).")
    FLAGS.add(model, "--warmup-ratio", type=float,
              help="--lr-schedule linear: share of steps warming up, unless --warmup-steps (default: 0.05).")
    FLAGS.add(model, "--warmup-steps", type=int,
              help="Warm-up steps (default: --warmup-ratio's with linear, 10,000 with rsqrt, as T5's).")

    delta = parser.add_argument_group(
        "delta-tuning", "Train a small delta on the frozen --model-name-or-path instead of every weight; the output "
        "folder holds the adapter as PEFT saves it (AdapterHub's format for bottleneck adapters). The encoder tasks "
        "take lora and ia3, and train the classifier's new head with the delta (saved whole, PEFT's "
        "modules_to_save).")
    FLAGS.add(delta, "--delta", choices=("lora", "ia3", "prompt", "prefix", "adapter"),
              help="lora: low-rank updates beside chosen layers. ia3: learned scaling of keys, values and the "
                   "feed-forward. prompt: virtual tokens before the input. prefix: virtual keys and values in T5's "
                   "decoder self-attention. adapter: bottleneck MLPs after the feed-forward (and attention). "
                   "lora and ia3 take T5, RoBERTa, BERT and ELECTRA; the others T5 only.")
    FLAGS.add(delta, "--lora-rank", type=int, help="LoRA: rank r of the update (default: 8).")
    FLAGS.add(delta, "--lora-alpha", type=float, help="LoRA: the update is scaled by alpha / r (default: 16).")
    FLAGS.add(delta, "--lora-dropout", type=float, help="LoRA: dropout on the update's input (default: 0).")
    FLAGS.add(delta, "--lora-targets", type=lambda text: tuple(text.split(",")), metavar="NAMES",
              help="LoRA: comma-separated module names, matched as PEFT matches target_modules (default as PEFT's: "
                   "q,v for T5, query,value for RoBERTa, BERT and ELECTRA).")
    FLAGS.add(delta, "--use-rslora", action="store_true", help="LoRA: scale by alpha / sqrt(r) (rank-stabilized).")
    FLAGS.add(delta, "--ia3-targets", type=lambda text: tuple(text.split(",")), metavar="NAMES",
              help="IA3: comma-separated module names (default as PEFT's: k,v,wo for T5 with wo the feed-forward; "
                   "key,value,output.dense for RoBERTa and BERT, and ELECTRA as BERT).")
    FLAGS.add(delta, "--num-virtual-tokens", type=int, help="Prompt and prefix tuning: virtual tokens (default: 20).")
    FLAGS.add(delta, "--adapter-kind", choices=("pfeiffer", "houlsby"),
              help="Bottleneck adapters: pfeiffer (after each feed-forward) or houlsby (after attention too) "
                   "(default: pfeiffer).")
    FLAGS.add(delta, "--adapter-reduction", type=int,
              help="Bottleneck adapters: hidden size / bottleneck size (default: 16).")

    output = parser.add_argument_group("output")
    FLAGS.add(output, "--output-dir",
              help="Local folder (required): save_pretrained model and tokenizer (each epoch; for T5 tasks with "
                   "--eval-dataset only an epoch that beats the best so far), backup/ to resume, logs/ for "
                   "TensorBoard, training_args.json (this run's settings: --config replays it).")
    FLAGS.add(output, "--backup-steps", type=int,
              help="Write the resumable backup every N optimizer steps, a multiple of --steps-per-execution (default: "
                   "at each epoch's end).")
    FLAGS.add(output, "--logging-steps", type=int,
              help="Log the mean training loss of every N steps to TensorBoard (default: once per epoch); validation "
                   "is logged at each epoch's end, against the step reached.")
    FLAGS.add(output, "--hub-model-id", help="Push the output folder to this 🤗 Hub repo each epoch (in the background).")
    FLAGS.add(output, "--allow-changed-settings", action="store_true",
              help="Resume from --output-dir's backup even though a setting that decides the result (learning rate, "
                   "schedule, batch, data, model, seed, task) differs from the backup's: the change is recorded, with "
                   "the step it took effect at, in training_args.json. Without it such a resume is refused; settings "
                   "that do not change the result (logging, backups, push, hardware) may change freely.")
    add_verbose_flag(parser)
    return parser


def build_config(args: argparse.Namespace) -> TrainingConfig:
    """The settings: TrainingConfig's defaults, then --config's file, then the flags given."""
    file_values = read_config_file(args.config) if args.config else {}
    file_values.pop(RUN_INFO_KEY, None)
    if args.head:
        file_values["task"] = task_from_head(FLAGS.given(args).get("task", file_values.get("task")), args.head)
    return FLAGS.build(args, base=file_values, source=f"--config {args.config}" if args.config else "the flags")


def main(argv: Optional[Sequence[str]] = None, prog: str = "python train.py") -> None:
    args = build_parser(prog).parse_args(argv)
    config = build_config(args)
    check_cluster(config.hardware)  # TF_CONFIG, before TensorFlow loads
    import_tensorflow(args.verbose)  # after the flags are checked: TensorFlow takes seconds to load
    quiet_libraries(args.verbose)
    from mlm_tpu.tasks import training_task
    from mlm_tpu.training.trainer import train

    train(config, training_task(config))
