"""ELECTRA against masked-LM pretraining with the same discriminator shape: the cost of one training step of each.

`--task electra` trains a generator (a share of the discriminator's width, the preset's) and the discriminator;
`--task mlm` trains one masked LM of the discriminator's shape (TFElectraForMaskedLM on the preset's discriminator
config: BERT's objective on ELECTRA's architecture, the paper's baseline). Same shards (WikiText-2 validation,
128-token examples, an 8,000-piece tokenizer, made by the real commands), same batch, AdamW, 15% masked,
deterministic kernels as the trainer runs on CPUs; both masked-LM heads (the masked LM's, ELECTRA's generator's)
sparse, at the default prediction slots, as the trainer runs them (--dense-mlm-head: both at every position). Each
objective is timed in its own process with the trainer's own step function (one step per execution; the best of
--rounds rounds of --steps steps, after a warm-up round that traces it): steps/s and tokens/s from wall time, CPU
seconds per step (every thread of the process, steadier on a shared machine), the model FLOPs of a step as the
logs count them (training/flops.py), and ELECTRA's cost relative to the masked LM's.

With --downstream, the quality side instead: the masked LM and ELECTRA each pretrained for the same CPU time on
the downstream benchmark's corpus and recipe (benchmarks/downstream.py: IMDB's text, a 2,048-piece tokenizer, 64
tokens, 40% masked, batch 128, lr 3e-3), ELECTRA's discriminator the masked LM's shape (hidden 64, 2 layers, 2
heads, feed-forward 256, embeddings 64; its generator half as wide), then both fine-tuned on Rotten Tomatoes and
IMDB, median and min-max of --seeds, beside the same shape from scratch and the TF-IDF floor.
Usage: python benchmarks/electra.py [--model-config electra-small] [--steps 5] [--rounds 2] [--dense-mlm-head]
       python benchmarks/electra.py --downstream [--cpu-minutes 10] [--seeds 3] [--root runs/bench-downstream]
"""

import argparse
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from train_throughput import MAX_LENGTH, ROOT, own_loop_seconds_per_step, prepare_wikitext, prepared_wikitext

OBJECTIVES = ("mlm", "electra")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
LEARNING_RATE = 5e-4  # ELECTRA-Small's in the paper


def model_config_of(objective: str, preset: str, work: Path) -> str:
    """What --model-config trains `objective` with the preset's discriminator shape: the preset for ELECTRA, its
    discriminator's config.json (written into `work`, fitted to the tokenizer) for the masked LM."""
    if objective == "electra":
        return preset
    path = work / f"{preset}-discriminator.json"
    if not path.is_file():
        from mlm_tpu.electra.presets import discriminator_config
        from mlm_tpu.tokenizer.load import load_tokenizer

        discriminator_config(preset, load_tokenizer(str(work / "tokenizer")), MAX_LENGTH).to_json_file(str(path))
    return str(path)


def measure(objective: str, work: Path, preset: str, batch_size: int, steps: int, rounds: int,
            dense_mlm_head: bool = False) -> dict:
    """One objective's step cost, in this process."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras)
    from mlm_tpu.console import import_tensorflow

    tf = import_tensorflow()
    tf.config.experimental.enable_op_determinism()  # as the trainer runs on CPUs
    import tf_keras as keras
    from transformers import create_optimizer

    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import training_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tasks import make_task
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(work / "tokenizer"))
    shards = find_shards(str(work / "shards" / "train"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(MAX_LENGTH))
    config = TrainingConfig(str(work / "shards" / "train"), output_dir=str(work / "unused"), task=objective,
                            model_config=model_config_of(objective, preset, work), dense_mlm_head=dense_mlm_head)
    task = make_task(objective)
    task.prepare(config, tokenizer, shards, None)
    keras.utils.set_random_seed(0)
    model = task.build_model(config, tokenizer, shards)
    model.build_in_name_scope()
    optimizer, _ = create_optimizer(LEARNING_RATE, steps * (rounds + 1), 0, weight_decay_rate=1e-3)
    dataset = training_batches(shards, batch_size, task.make_transform(tokenizer)(0), seed=0, pipeline=0,
                               window=2**18, batches_per_epoch=shards.records // batch_size)
    wall, cpu = own_loop_seconds_per_step(dataset, model, optimizer, steps, rounds, task=task, cpu_seconds_too=True)
    shape = model.config
    return {"seconds_per_step": wall, "cpu_seconds_per_step": cpu, "parameters": model.count_params(),
            "flops_per_step": task.example_cost(model, shards).flops * batch_size,
            "head": f"sparse, {task.prediction_slots} slots" if task.prediction_slots else "dense",
            "shape": f"{shape.num_hidden_layers} layers of width {shape.hidden_size}, embeddings of "
                     f"{shape.embedding_size}" + (f", a generator of width {model.generator.config.hidden_size}"
                                                  if objective == "electra" else "")}


@contextmanager
def work_folder(keep: str):
    """--work DIR (kept, made once), else a temporary folder: the tokenizer and the training shards."""
    if not keep:
        with prepared_wikitext() as (work, _):
            yield work
        return
    work = Path(keep)
    if not (work / "shards" / "train").is_dir():
        work.mkdir(parents=True, exist_ok=True)
        prepare_wikitext(work, ENV)
    yield work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-config", default="electra-small", help="an ELECTRA preset: the discriminator's shape")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds, after a warm-up round")
    parser.add_argument("--dense-mlm-head", action="store_true", help="both masked-LM heads at every position")
    parser.add_argument("--downstream", action="store_true",
                        help="instead: pretrain both for the same CPU time and judge them downstream")
    parser.add_argument("--cpu-minutes", type=float, default=10, help="--downstream: each objective's budget")
    parser.add_argument("--seeds", type=int, default=3, help="--downstream: fine-tuning seeds per task")
    parser.add_argument("--root", type=Path, help="--downstream: its cache (default: benchmarks/downstream.py's)")
    parser.add_argument("--work", default="", help="keep the tokenizer, shards and runs in this folder")
    parser.add_argument("--measure", choices=OBJECTIVES, help=argparse.SUPPRESS)  # the child processes' job
    args = parser.parse_args()
    if args.downstream:
        from downstream import DEFAULT_ROOT, ELECTRA_RECIPE, compare

        print(compare({"mlm": [], "electra": ELECTRA_RECIPE}, args.cpu_minutes * 60, args.seeds,
                      args.root or DEFAULT_ROOT))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, Path(args.work), args.model_config, args.batch_size, args.steps,
                                 args.rounds, args.dense_mlm_head)))
        return
    with work_folder(args.work) as work:
        results = {}
        for objective in OBJECTIVES:
            child = subprocess.run([sys.executable, __file__, "--measure", objective, "--work", str(work),
                                    "--model-config", args.model_config, "--batch-size", str(args.batch_size),
                                    "--steps", str(args.steps), "--rounds", str(args.rounds),
                                    *(["--dense-mlm-head"] if args.dense_mlm_head else [])],
                                   capture_output=True, text=True, cwd=ROOT, env=ENV)
            if child.returncode:
                sys.exit(f"measuring {objective} failed:\n{child.stderr[-3000:]}")
            results[objective] = json.loads(child.stdout.strip().splitlines()[-1])
        tokens = args.batch_size * MAX_LENGTH
        print(f"'{args.model_config}' ({results['electra']['shape']}), batch {args.batch_size} x {MAX_LENGTH} tokens, "
              f"CPU, deterministic kernels, masked-LM heads {results['mlm']['head']}, best of {args.rounds} rounds of "
              f"{args.steps} steps")
        print(f"  {'objective':<10}{'steps/s':>9}{'tokens/s':>10}{'CPU s/step':>12}{'GFLOP/step':>12}{'parameters':>13}")
        for objective, figures in results.items():
            seconds = figures["seconds_per_step"]
            print(f"  {objective:<10}{1 / seconds:>9.2f}{tokens / seconds:>10,.0f}"
                  f"{figures['cpu_seconds_per_step']:>12.2f}{figures['flops_per_step'] / 1e9:>12.1f}"
                  f"{figures['parameters']:>13,}")
        mlm, electra = results["mlm"], results["electra"]
        print(f"  ELECTRA / masked LM: {electra['seconds_per_step'] / mlm['seconds_per_step']:.2f}x the wall time of "
              f"a step, {electra['cpu_seconds_per_step'] / mlm['cpu_seconds_per_step']:.2f}x its CPU time, "
              f"{electra['flops_per_step'] / mlm['flops_per_step']:.2f}x its model FLOPs")


if __name__ == "__main__":
    main()
