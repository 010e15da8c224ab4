"""ModernBERT's training speed on this CPU, side by side in one run: mlm_tpu's ModernBERT (sparse head, its default,
and dense), transformers 5's PyTorch `ModernBertForMaskedLM` (sdpa attention, `sparse_prediction` on and off) and
mlm_tpu's RoBERTa of the same parameter count (sparse and dense heads), at one shape and batch; steps/s, tokens/s,
model FLOPs and MFU, then where mlm_tpu's ModernBERT step spends its time (TensorFlow's profiler) and PyTorch's.

- The shape: a ModernBERT of --layers x --hidden (GeGLU --intermediate, --heads heads, a window of
  --local-attention, global every --global-every layers), rows of --length tokens, so local layers see a part of
  the row; the RoBERTa has the same width, heads and vocabulary, a feed-forward of 4x the width, and the layer count
  that brings its parameters nearest the ModernBERT's (both counts are printed).
- The data: the same --batch-size rows of random tokens (<s> ... </s>, one document per row, no padding), masked
  by mlm_tpu's masker at --mlm-probability (ModernBERT's recipe: 30%); PyTorch trains on the dense masker's very
  batches. mlm_tpu's ModernBERT gets its rows' document ids, as its pretraining does (packing without cross-talk).
- The step: mlm_tpu's training step (training/step.py's make_train_steps, the masked-LM task's forward) with AdamW
  (train.py's default weight decay, 1e-3), no XLA (train.py's default on CPUs); PyTorch: forward, backward and
  torch.optim.AdamW, torch.set_num_threads at the cores TensorFlow uses (all of them, its default); its
  sparse_prediction both with OpenMP's default wait policy and with OMP_WAIT_POLICY=PASSIVE (on a loaded machine
  OpenMP's spinning threads wait for each other's turn on the cores), its dense head with PASSIVE.
- The timing: each model in its own process, started and warmed up (tracing, one step) one after the other; then
  --rounds rounds in which each model in turn runs --steps steps while the others wait (A B C D..., A B C D...), so
  the machine's other load falls on all alike; the median round is reported (the best beside it), and the CPU
  seconds of the process per step (all its threads), steadier than wall time on a loaded machine; fewer rounds
  where the next would end the run past --time-budget. A float32 matmul of 2048 x 2048 runs in the same rounds: what
  TensorFlow's kernels reach on this CPU under the same load. The profiles run last, over 2 steps.
- FLOPs: PaLM's count (training/flops.py; modernbert/flops.py counts each local layer's window, not the whole row),
  the sparse heads at their positions: mlm_tpu's prediction slots, PyTorch's masked tokens. MFU divides them by the
  CPU's float32 peak: cores x clock (/proc/cpuinfo) x --flops-per-cycle; the model FLOPs per CPU second of the
  process are beside it, a measure of the kernels that the machine's other load touches less.
The PyTorch rows need a Python with torch and transformers 5: --pytorch-python, by default $MLM_TPU_PYTORCH_PYTHON.
Usage: python benchmarks/modernbert_speed.py [--length 256] [--batch-size 8] [--rounds 5] [--time-budget 660]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
REPLY = "@@reply "  # a worker's answers on stdout; anything else it prints is the libraries' chatter
MATMUL = 2048
BATCHES = 4  # distinct batches each model cycles through
PROFILED_STEPS = 2
TOP = 12


class Row(NamedTuple):
    """A model timed in its own process; the first two are what the ratios are taken against (with the same head)."""

    name: str
    kind: str  # tf or torch
    family: str  # modernbert, roberta or matmul
    head: str  # sparse or dense
    environment: dict


PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}  # OpenMP's threads sleep at a barrier instead of spinning
ROWS = (Row("mlm_tpu ModernBERT, sparse head", "tf", "modernbert", "sparse", {}),
        Row("mlm_tpu ModernBERT, dense head", "tf", "modernbert", "dense", {}),
        Row("transformers 5 ModernBertForMaskedLM, sparse_prediction", "torch", "modernbert", "sparse", {}),
        Row("transformers 5 ModernBertForMaskedLM, sparse_prediction, OMP_WAIT_POLICY=PASSIVE", "torch", "modernbert",
            "sparse", PASSIVE),
        Row("transformers 5 ModernBertForMaskedLM, dense, OMP_WAIT_POLICY=PASSIVE", "torch", "modernbert", "dense",
            PASSIVE),
        Row("mlm_tpu RoBERTa (same parameters), sparse head", "tf", "roberta", "sparse", {}),
        Row("mlm_tpu RoBERTa (same parameters), dense head", "tf", "roberta", "dense", {}),
        Row(f"TensorFlow float32 matmul {MATMUL}x{MATMUL}x{MATMUL}", "tf", "matmul", "-", {}))
PROFILED = (0, 3)  # the rows profiled after the rounds
NOT_OPS = ("While", "StatelessWhile", "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf", "Case")


# ---------------------------------------------------------------------------------------------------- the shapes
def modernbert_values(args) -> dict:
    return dict(model_type="modernbert", hidden_size=args.hidden, num_hidden_layers=args.layers,
                num_attention_heads=args.heads, intermediate_size=args.intermediate,
                local_attention=args.local_attention, global_attn_every_n_layers=args.global_every,
                max_position_embeddings=args.length, vocab_size=args.vocab_size)


def modernbert_parameters(values: dict) -> int:
    """Every weight of the masked LM (the decoder tied to the embeddings, counted once)."""
    from mlm_tpu.modernbert import flops
    from mlm_tpu.modernbert.config import from_dict

    config = from_dict(values, source="the benchmark's shape")
    return flops.encoder_parameters(config) + flops.head_parameters(config, "masked_lm")


def roberta_parameters(hidden: int, layers: int, vocab_size: int, length: int) -> int:
    """A RoBERTa masked LM as config_for makes it: its layers, embeddings (tokens, length + 2 positions, one token
    type, their layer norm) and head (dense, layer norm, the tied decoder's bias)."""
    from types import SimpleNamespace

    from mlm_tpu.training.flops import encoder_parameters, masked_lm_head_parameters

    shape = SimpleNamespace(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=4 * hidden)
    return (encoder_parameters(shape) + masked_lm_head_parameters(hidden, vocab_size)
            + (length + 2 + 1) * hidden)


def roberta_values(args, target: int) -> dict:
    """The RoBERTa of `target` parameters: the ModernBERT's width, heads and vocabulary, RoBERTa's feed-forward of 4x
    the width, the nearest layer count."""
    layers = min(range(1, 4 * args.layers + 1),
                 key=lambda count: abs(roberta_parameters(args.hidden, count, args.vocab_size, args.length) - target))
    return dict(model_type="roberta", hidden_size=args.hidden, num_hidden_layers=layers,
                num_attention_heads=args.heads, intermediate_size=4 * args.hidden)


def cpu_peak(flops_per_cycle: int):
    """(float32 FLOP/s of this CPU's cores at their clock, in words)."""
    cores = len(os.sched_getaffinity(0))
    megahertz = next(float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz"))
    peak = cores * megahertz * 1e6 * flops_per_cycle
    return peak, (f"{cores} cores x {megahertz / 1000:.2f} GHz x {flops_per_cycle} float32 FLOPs per cycle = "
                  f"{peak / 1e9:.0f} GFLOP/s")


# ---------------------------------------------------------------------------------------------------- the workers
class Worker:
    """A model and its training step; `time` runs steps of it and says their wall and CPU seconds."""

    def train_step(self) -> None:
        raise NotImplementedError

    def time(self, steps: int) -> dict:
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(steps):
            self.train_step()
        return {"seconds": (time.perf_counter() - started) / steps,
                "cpu_seconds": (time.process_time() - cpu_started) / steps}


class TensorFlowWorker(Worker):
    """One mlm_tpu masked LM with its data and training step, as train.py builds them."""

    def __init__(self, spec: dict, family: str, head: str):
        import tensorflow as tf
        import tf_keras as keras

        from mlm_tpu.console import import_tensorflow
        from mlm_tpu.mlm.task import MaskedLmTask
        from mlm_tpu.shards.layout import BatchLayout
        from mlm_tpu.training.dropout import key_dropout_by_step
        from mlm_tpu.training.flops import masked_lm_cost
        from mlm_tpu.training.step import make_train_steps
        from mlm_tpu.training.weight_decay import AdamW
        from sparse_head import word_level_tokenizer

        import_tensorflow()
        keras.utils.set_random_seed(0)
        rows, length = spec["batch_size"], spec["length"]
        tokenizer = word_level_tokenizer(spec["vocab_size"])
        run = argparse.Namespace(model_name_or_path=None, model_config=spec[f"{family}_config"], config_overrides=None,
                                 seed=0, masking="token", mlm_probability=spec["mlm_probability"],
                                 mask_replace_prob=None, random_replace_prob=None, mlm_probability_schedule=None,
                                 eval_mlm_probability=None, dense_mlm_head=head == "dense",
                                 max_predictions_per_seq=None, new_embeddings=None)
        shards = argparse.Namespace(length=length)
        self.task = MaskedLmTask("mlm")
        self.task.prepare(run, tokenizer, shards, None)  # masking, packing, the sparse head's slots, as train.py
        self.model = self.task.build_model(run, tokenizer, shards)
        self.model.build_in_name_scope()
        masker = self.task.make_transform(tokenizer)(0)
        data = [masker(number, batch) for number, batch in enumerate(random_rows(tokenizer, rows, length))]
        if family == "modernbert" and head == "dense":
            import numpy as np

            np.savez(spec["batches"], **{name: np.stack([batch[name].numpy() for batch in data])
                                         for name in ("input_ids", "attention_mask", "labels")})
        strategy = tf.distribute.get_strategy()
        optimizer = AdamW(1e-4, weight_decay_rate=1e-3)
        keys = key_dropout_by_step(self.model, 0, BatchLayout(1, rows, 1, 1))
        self.step = make_train_steps(strategy, self.model, optimizer, keys, task=self.task)
        dataset = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda *parts: tf.stack(parts), *data))
        self.iterator = iter(strategy.experimental_distribute_dataset(dataset.repeat()))
        self.one = tf.constant(1)
        self.time(1)  # tracing and a first step
        slots = self.task.prediction_slots
        self.ready = {"parameters": int(self.model.count_params()), "slots": slots,
                      "flops_per_example": masked_lm_cost(self.model.config, length, slots or length).flops,
                      "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads()}

    def train_step(self) -> None:
        self.step(self.iterator, self.one).numpy()

    def profile(self, folder: str) -> dict:
        """TensorFlow's profiler over PROFILED_STEPS steps: the ops' time summed by op type and by module (the layer
        index left out; the backward pass's ops under the module of their forward op)."""
        import tensorflow as tf

        tf.profiler.experimental.start(folder)
        self.time(PROFILED_STEPS)
        tf.profiler.experimental.stop()
        return op_times(next(Path(folder).rglob("*.xplane.pb")))


def random_rows(tokenizer, rows: int, length: int):
    """BATCHES batches of `rows` rows of random tokens between <s> and </s>, no padding."""
    import tensorflow as tf

    specials = len(tokenizer.all_special_ids)
    ids = tf.random.stateless_uniform([BATCHES, rows, length - 2], seed=[1, 2], minval=specials,
                                      maxval=len(tokenizer), dtype=tf.int32)
    frame = lambda token: tf.fill([BATCHES, rows, 1], token)  # noqa: E731
    ids = tf.concat([frame(tokenizer.cls_token_id), ids, frame(tokenizer.sep_token_id)], axis=2)
    return [{"input_ids": ids[number], "attention_mask": tf.ones_like(ids[number])} for number in range(BATCHES)]


def op_times(path: Path) -> dict:
    """The ops' time in a profile, by op type and by ModernBERT module (forward and backward apart), from the
    executor threads' op events ("name:Type"; control flow left out: it holds ops)."""
    from collections import Counter, defaultdict

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    by_type, by_module = Counter(), defaultdict(lambda: [0, 0])
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                full_name = plane.event_metadata[event.metadata_id].name  # not an op: "ExecutorState::Process"
                name, _, kind = full_name.rpartition(":")
                if not name or "::" in full_name or kind in NOT_OPS:
                    continue
                by_type[kind] += event.duration_ps
                by_module[module_of(name)]["gradient_tape/" in name] += event.duration_ps
    total = sum(by_type.values())
    per_step = lambda picoseconds: picoseconds / 1e9 / PROFILED_STEPS  # noqa: E731
    modules = sorted(by_module.items(), key=lambda item: -sum(item[1]))[:TOP]
    return {"total_ms": per_step(total),
            "types": [(kind, per_step(value), value / total) for kind, value in by_type.most_common(TOP)],
            "modules": [(module, per_step(forward), per_step(backward), (forward + backward) / total)
                        for module, (forward, backward) in modules]}


def module_of(name: str) -> str:
    """The ModernBERT module an op of the train step belongs to (every layer's together), from its name
    ("while/body/_1/gradient_tape/while/ModernBertForMaskedLM/model/layers.3/attn/Wqkv/Tensordot/MatMul")."""
    parts = name.split("while/")[-1].split("/")
    if parts[0].startswith("ModernBert"):
        parts = parts[1:]
    if parts[0] == "model" and parts[1].startswith("layers."):
        module, part = parts[2], parts[3] if len(parts) > 3 else ""
        if part in ("Wqkv", "Wo", "Wi"):
            return f"layers.N/{module}/{part}"
        words = {"attn": "attn: rotary, scores, softmax, weighted sum", "mlp": "mlp: GeGLU"}
        return f"layers.N/{words.get(module, module)}"
    if parts[0] == "model":
        return f"model/{parts[1]}" if parts[1] in ("embeddings", "final_norm") else "model: masks, rotary tables"
    if parts[0] in ("head", "decoder"):
        return parts[0]
    if parts[0].startswith("AdamWeightDecay"):
        return "optimizer (AdamW)"
    return "loss, gradient sums, counts"


class MatmulWorker(Worker):
    """A float32 matmul of MATMUL x MATMUL matrices per step: TensorFlow's best case on this CPU."""

    def __init__(self, spec: dict, family: str, head: str):
        import tensorflow as tf

        from mlm_tpu.console import import_tensorflow

        import_tensorflow()
        self.matrix = tf.random.normal([MATMUL, MATMUL])
        self.product = tf.function(lambda matrix: tf.reduce_sum(tf.matmul(matrix, matrix)))
        self.time(1)
        self.ready = {"parameters": 0, "flops_per_step": 2.0 * MATMUL ** 3}

    def train_step(self) -> None:
        self.product(self.matrix).numpy()


class PyTorchWorker(Worker):
    """transformers 5's ModernBertForMaskedLM (sdpa attention) on the same batches, with torch's AdamW."""

    def __init__(self, spec: dict, family: str, head: str):
        import numpy as np
        import torch
        from transformers import AutoModelForMaskedLM, ModernBertConfig

        torch.manual_seed(0)
        torch.set_num_threads(spec["threads"])
        values = {name: value for name, value in json.loads(Path(spec["modernbert_config"]).read_text()).items()
                  if name != "model_type"}
        special = {"pad_token_id": 1, "bos_token_id": 0, "cls_token_id": 0, "eos_token_id": 2, "sep_token_id": 2}
        config = ModernBertConfig(**{**values, **special, "sparse_prediction": head == "sparse"})
        self.model = AutoModelForMaskedLM.from_config(config, attn_implementation="sdpa")
        assert self.model.config._attn_implementation == "sdpa", self.model.config._attn_implementation
        self.model.train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=1e-3)
        saved = np.load(spec["batches"])
        self.batches = [{name: torch.from_numpy(saved[name][number]).long() for name in saved.files}
                        for number in range(BATCHES)]
        self.next = 0
        self.time(1)
        masked = float((saved["labels"] != -100).sum()) / saved["labels"].shape[0] / saved["labels"].shape[1]
        self.ready = {"parameters": sum(weight.numel() for weight in self.model.parameters()),
                      "masked_per_row": masked, "threads": torch.get_num_threads(), "torch": torch.__version__}

    def train_step(self) -> None:
        batch = self.batches[self.next % BATCHES]
        self.next += 1
        self.model(**batch).loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def profile(self, folder: str) -> dict:
        """torch's profiler over PROFILED_STEPS steps: the ops' own CPU time by op."""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            self.time(PROFILED_STEPS)
        events = [event for event in profiler.key_averages() if event.self_cpu_time_total > 0]
        total = sum(event.self_cpu_time_total for event in events)
        events.sort(key=lambda event: -event.self_cpu_time_total)
        return {"total_ms": total / 1e3 / PROFILED_STEPS,
                "types": [(event.key, event.self_cpu_time_total / 1e3 / PROFILED_STEPS,
                           event.self_cpu_time_total / total) for event in events[:TOP]]}


def serve(kind: str, family: str, head: str, spec_path: str) -> None:
    """A worker: build, say ready, then answer the parent's commands ("time N", "profile FOLDER", "quit")."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = json.loads(Path(spec_path).read_text())
    worker_class = PyTorchWorker if kind == "torch" else MatmulWorker if family == "matmul" else TensorFlowWorker
    worker = worker_class(spec, family, head)
    print(REPLY + json.dumps(worker.ready), flush=True)
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "quit":
            return
        reply = worker.time(int(argument)) if command == "time" else worker.profile(argument)
        print(REPLY + json.dumps(reply), flush=True)


# ---------------------------------------------------------------------------------------------------- the parent
class Child:
    """A worker process, its log in the run's folder."""

    def __init__(self, python: str, row: Row, spec_path: str, folder: str, number: int):
        self.row = row
        self.log_path = os.path.join(folder, f"worker-{number}.log")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2", **row.environment}
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen([python, __file__, "--worker", row.kind, row.family, row.head, spec_path],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                            env=env)
        self.rounds = []

    def answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        tail = Path(self.log_path).read_text()[-3000:]
        raise SystemExit(f"error: the worker of {self.row.name!r} ended without answering; its log ends:\n{tail}")

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.close()
        self.process.wait()


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=384, help="GeGLU width (Wi gives twice it)")
    parser.add_argument("--local-attention", type=int, default=128)
    parser.add_argument("--global-every", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--mlm-probability", type=float, default=0.3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1, help="steps per model per round")
    parser.add_argument("--time-budget", type=float, default=660,
                        help="seconds for the whole run: fewer rounds are timed (at least 2) where the next one and "
                             "the profiles would not fit")
    parser.add_argument("--flops-per-cycle", type=int, default=32,
                        help="float32 FLOPs per cycle and core for the peak (default 32: two 256-bit FMA pipes, as "
                             "AMD's Zen 2-4 and most AVX2 cores; Intel cores with two AVX-512 FMA units: 64)")
    parser.add_argument("--pytorch-python", default=os.environ.get("MLM_TPU_PYTORCH_PYTHON"),
                        help="a Python with torch and transformers 5 (default: $MLM_TPU_PYTORCH_PYTHON; none: "
                             "the PyTorch rows are left out)")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        serve(*args.worker)
        return
    sys.path.insert(0, str(ROOT))
    started, load_at_start = time.time(), load_average()
    folder = tempfile.mkdtemp(prefix="modernbert-speed-")
    modernbert = modernbert_values(args)
    roberta = roberta_values(args, modernbert_parameters(modernbert))
    spec = {"batch_size": args.batch_size, "length": args.length, "vocab_size": args.vocab_size,
            "mlm_probability": args.mlm_probability, "threads": len(os.sched_getaffinity(0)),
            "modernbert_config": os.path.join(folder, "modernbert.json"),
            "roberta_config": os.path.join(folder, "roberta.json"), "batches": os.path.join(folder, "batches.npz")}
    Path(spec["modernbert_config"]).write_text(json.dumps(modernbert))
    Path(spec["roberta_config"]).write_text(json.dumps(roberta))
    spec_path = os.path.join(folder, "spec.json")
    Path(spec_path).write_text(json.dumps(spec))
    rows = [row for row in ROWS if row.kind != "torch" or args.pytorch_python]
    print(f"ModernBERT {args.layers} x {args.hidden} (GeGLU {args.intermediate}, {args.heads} heads, window "
          f"{args.local_attention}, global every {args.global_every}); RoBERTa {roberta['num_hidden_layers']} x "
          f"{args.hidden} (feed-forward {4 * args.hidden}); vocabulary {args.vocab_size:,}; batch {args.batch_size} x "
          f"{args.length} tokens, {args.mlm_probability:.0%} masked; load average at the start {load_at_start}",
          flush=True)
    children, ready = [], []
    for number, row in enumerate(rows):  # one at a time, so that none starts while another is timed
        children.append(Child(args.pytorch_python if row.kind == "torch" else sys.executable, row, spec_path,
                              folder, number))
        ready.append(children[-1].answer())
        print(f"  ready: {row.name} ({time.time() - started:.0f} s)", flush=True)
    time_rounds(args, children, started)
    profiled = [child for child in children if child.row in (ROWS[index] for index in PROFILED)]
    profiles = {child.row.name: child.ask(f"profile {os.path.join(folder, f'profile-{number}')}")
                for number, child in enumerate(profiled)}
    for child in children:
        child.close()
    load_at_end = load_average()
    report(args, rows, ready, children, profiles, modernbert)
    print(f"\nLoad average at the start {load_at_start}, at the end {load_at_end} (/proc/loadavg: 1, 5 and 15 "
          f"minutes); {time.time() - started:.0f} s in all; the workers' logs in {folder}")


def time_rounds(args, children, started: float) -> None:
    """Up to --rounds rounds, each model's --steps steps in turn; fewer (not under 2) where the next round and the
    profiles (about 2 rounds' time) would end past --time-budget."""
    for round_number in range(args.rounds):
        round_started = time.time()
        for child in children:
            child.rounds.append(child.ask(f"time {args.steps}"))
        took = time.time() - round_started
        print(f"  round {round_number + 1} of {args.rounds}: {took:.0f} s", flush=True)
        if round_number >= 1 and time.time() + 3 * took > started + args.time_budget:
            print(f"  stopping after {round_number + 1} rounds: --time-budget {args.time_budget:g} s", flush=True)
            return


def report(args, rows, ready, children, profiles, modernbert: dict) -> None:
    from mlm_tpu.modernbert import flops
    from mlm_tpu.modernbert.config import from_dict

    peak, peak_words = cpu_peak(args.flops_per_cycle)
    config = from_dict(modernbert, source="the benchmark's shape")
    tokens = args.batch_size * args.length
    figures = []
    for row, answer, child in zip(rows, ready, children):
        if row.kind == "torch":  # the same shape; its sparse head runs at the masked tokens only
            positions = answer["masked_per_row"] if row.head == "sparse" else args.length
            step_flops = args.batch_size * flops.training_flops(config, args.length, "masked_lm", positions)
        else:
            step_flops = answer.get("flops_per_step") or args.batch_size * answer["flops_per_example"]
        seconds = [result["seconds"] for result in child.rounds]
        figures.append({"median": statistics.median(seconds), "best": min(seconds), "flops": step_flops,
                        "cpu": statistics.median(result["cpu_seconds"] for result in child.rounds)})
    reference = {row.head: figure for row, figure in zip(rows, figures) if row[1:3] == ("tf", "modernbert")}
    print(f"\nMedian of {len(children[0].rounds)} interleaved rounds of {args.steps} step(s) each (the best round "
          f"beside it); MFU against {peak_words}\n")
    print("| | parameters | head positions per row | steps/s (best) | tokens/s | model GFLOP/step | MFU | "
          "CPU s/step | GFLOP per CPU s | vs mlm_tpu ModernBERT, same head |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row, answer, figure in zip(rows, ready, figures):
        if row.family == "matmul":
            positions, token_rate, ratio = "-", "-", "-"
        else:
            positions = (f"{answer['masked_per_row']:.0f} (masked)" if row.kind == "torch" and row.head == "sparse"
                         else f"{answer['slots']} (slots)" if row.head == "sparse" else str(args.length))
            token_rate = f"{tokens / figure['median']:,.0f}"
            ratio = f"{reference[row.head]['median'] / figure['median']:.2f}x"
        print(f"| {row.name} | {answer['parameters']:,} | {positions} | {1 / figure['median']:.3f} "
              f"({1 / figure['best']:.3f}) | {token_rate} | {figure['flops'] / 1e9:,.1f} | "
              f"{figure['flops'] / figure['median'] / peak:.1%} | {figure['cpu']:.2f} | "
              f"{figure['flops'] / figure['cpu'] / 1e9:.0f} | {ratio} |")
    torch_answers = [answer for row, answer in zip(rows, ready) if row.kind == "torch"]
    if torch_answers:
        print(f"\nPyTorch: torch {torch_answers[0]['torch']}, torch.set_num_threads({torch_answers[0]['threads']}); "
              f"TensorFlow: intra-op threads {ready[0]['intra_op_threads'] or 'its default (one per core)'}")
    for name, profile in profiles.items():
        print(f"\nWhere a step of {name} spends its time: {profile['total_ms']:,.0f} ms of ops per step (summed over "
              "threads)")
        for title, columns in (("types", "op | ms per step | share"),
                               ("modules", "module | ms forward | ms backward | share")):
            if title in profile:
                print(f"\n| {columns} |\n|{' --- |' * (columns.count('|') + 1)}")
                for key, *values, share in profile[title]:
                    print(f"| {key} | {' | '.join(f'{value:,.1f}' for value in values)} | {share:.1%} |")


if __name__ == "__main__":
    main()
