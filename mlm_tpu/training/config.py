"""The typed configs of the commands that run models: the trunk of a training run (`python train.py`: what
every task has; mlm_tpu/tasks.py's TrainingConfig joins each task's and delta method's settings to it), an
evaluation (`python -m mlm_tpu.evaluate`), and the hardware both run on. No TensorFlow here: flags are checked
before it loads.

The defaults here are the only defaults. A run writes its config to `training_args.json` in its
output folder, and `python train.py --config <that file>` replays (or resumes) exactly that run;
`configs/` holds the README's runs written the same way.
"""

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

from mlm_tpu.configuration import setting
from mlm_tpu.training.settings import MaskingSettings

MAX_SEED = 2**31 - 1
OPTIMIZERS = ("adamw", "adafactor", "stableadamw")  # --optimizer (training/optimizers.py)
SCHEDULES = ("linear", "rsqrt", "wsd", "cosine", "constant")  # --lr-schedule
DECAY_SHAPES = ("linear", "1-sqrt")  # --decay-shape of --lr-schedule wsd


def mixture_rate(text: str):
    """A --mixture-rates value: a number, or the word 'examples' (checked with the others later)."""
    try:
        return float(text)
    except ValueError:
        return text


@dataclass
class HardwareConfig:
    """The flags that say where a command runs; shared by training and evaluation."""

    tpu: Optional[str] = setting(None, changes_result=False)  # "local": this TPU VM (or Colab's); else a node's name
    tpu_zone: Optional[str] = setting(None, changes_result=False)
    gcp_project: Optional[str] = setting(None, changes_result=False)
    bf16: Optional[bool] = None  # bfloat16 mixed precision (None: on exactly on TPUs)
    cpu_replicas: int = setting(1, low=1, high=64, changes_result=False)  # split the CPU into replicas (Mirrored...)
    # TensorFlow's deterministic kernels (None: on, except on TPUs)
    deterministic: Optional[bool] = setting(None, changes_result=False)
    communication: str = setting(  # several workers (TF_CONFIG): auto | ring | nccl
        "auto", changes_result=False, group="hardware", choices=("auto", "ring", "nccl"),
        help="Several workers (TF_CONFIG names more than one task; see `mlm-tpu launch`): how they all-reduce "
             "gradients, ring (gRPC, any device), nccl (GPUs) or auto (default: auto).")
    cluster_start_timeout: float = setting(  # several workers: seconds to wait for all to start
        300.0, low=1, changes_result=False, group="hardware", metavar="SECONDS",
        help="Several workers: how long each waits for all the others to start before naming the missing ones "
             "(default: 300).")

    @property
    def wants_bf16(self) -> bool:
        return self.bf16 if self.bf16 is not None else self.tpu is not None

    @property
    def wants_determinism(self) -> bool:
        return self.deterministic if self.deterministic is not None else self.tpu is None



@dataclass
class TrunkConfig:
    """What every training run has, whatever its task: data, model, optimisation, output and hardware. Each field
    with `help` is a flag of `python train.py` (cli/train.py generates them); `{presets}` in a help is filled in
    there."""

    # folder (local or gs://) of training shards; several: a mixture of them (shards/mixture.py)
    train_dataset: Union[str, Tuple[str, ...]] = setting(
        group="data", nargs="+", metavar="FOLDER",
        help="Folder (local or gs://) of training shards (required); several: a mixture, each example drawn from one "
             "of them at --mixture-rates, by (seed, step).")
    # local folder: the model each epoch (or the best), backup/, logs/, training_args.json
    output_dir: str = setting(
        changes_result=False, group="output",
        help="Local folder (required): save_pretrained model and tokenizer (each epoch; for T5 tasks with "
             "--eval-dataset only an epoch that beats the best so far), backup/ to resume, logs/ for TensorBoard, "
             "training_args.json (this run's settings: --config replays it).")
    task: str = setting(  # mlm | electra | span-corruption | classification | generation | ... (mlm_tpu.tasks)
        "mlm", group="task", help="{tasks}")  # each task's words are declared with it (mlm_tpu/tasks.py's TaskWords)
    # several --train-dataset folders: each one's share, or ("examples",) for shares proportional to their sizes
    mixture_rates: Optional[Tuple[Union[float, str], ...]] = setting(
        None, group="data", nargs="+", type=mixture_rate, metavar="RATE",
        help="With several --train-dataset folders: each one's share of the examples, in the same order (normalised "
             "to sum to 1), or 'examples' for shares proportional to their sizes (SeqIO's rate_num_examples; the "
             "default).")
    mixture_maximum: Optional[int] = setting(  # with "examples": a member counts as at most K examples
        None, low=1, group="data", metavar="K",
        help="With --mixture-rates examples: a member of more than K examples counts as K (SeqIO's maximum; T5's "
             "examples-proportional mixing with limit K), so a huge member does not crowd out the others (default: "
             "no limit).")
    mixture_temperature: float = setting(  # with "examples": sizes ** (1 / T)
        1.0, low=0, low_open=True, group="data",
        help="With --mixture-rates examples: each size (after --mixture-maximum) raised to 1/T before sharing, T > 1 "
             "flattening the shares (default: 1).")
    eval_dataset: Optional[str] = setting(  # folder of validation shards, scored each epoch
        None, group="data", help="Folder of validation shards, scored each epoch.")
    tokenizer: Optional[str] = setting(  # the tokenizer the shards were made with
        None, group="data", names=("--tokenizer-name-or-path",),
        help="The tokenizer the shards were made with (folder or Hub name); for T5 tasks it defaults to "
             "--model-name-or-path's.")
    max_length: Optional[int] = setting(  # tokens per example (per input for T5); None: the shards'
        None, low=8, group="data",
        help="Tokens per example (per input, for T5), checked against the shards (default: what they hold).")
    shuffle_buffer_size: int = setting(  # records shuffled together, across the input pipelines
        2**18, low=1, group="data",
        help="Records shuffled together: each epoch the files are put in a new order and read one after the other, "
             "and the records shuffled within windows of this many, shared among the input pipelines (default: "
             "262144).")
    input_pipelines: Optional[int] = setting(  # virtual input pipelines the data order is defined over
        None, low=1, group="data", metavar="V",
        help="The data order is defined over V virtual input pipelines, each reading its own of V equal parts of the "
             "records (the shards one after the other) and giving each step global batch / V examples, so it is the "
             "same on any number of workers, replicas or TPU hosts that divides V; recorded in training_args.json, "
             "and a resumed run keeps its backup's. V must divide the global batch and be at most the number of "
             "shards, with several --train-dataset folders those of the folder with fewest, as each pipeline reads "
             "its part of each (default: the largest such V up to 64).")
    pack: bool = setting(  # text-to-text: several examples per row (shards/text2text_packing.py)
        False, group="data",
        help="classification, generation: put several training examples in each row (inputs after inputs, targets "
             "after targets; each attends only to itself through block-diagonal masks), so short examples do not "
             "train on padding. Validation stays one example per row. Its steps per epoch are counted by packing the "
             "training set once, and kept (in the backup, and in $MLM_TPU_CACHE, default ~/.cache/mlm_tpu) for "
             "resumes and later runs on the same shards and settings.")
    seed: int = setting(  # weights, data order, masks, spans, dropout
        42, low=0, high=MAX_SEED, group="data",
        help=f"Seed of weights, data order, masks and dropout, 0 to {MAX_SEED} (default: 42).")
    # model
    model_config: Optional[str] = setting(  # train from scratch with this shape (a preset, a config.json, a Hub name)
        None, group="model and optimisation", names=("--pretrained-model-config",),
        help="Train from scratch with this shape: a preset ({presets}), a config.json, or a Hub model name; "
             "vocabulary and positions are fitted to the tokenizer (default: base, electra-base for --task electra, "
             "t5-small for T5 tasks).")
    config_overrides: Optional[str] = setting(  # "name=value,..." changes to that shape, e.g. hidden_dropout_prob=0
        None, group="model and optimisation",
        help="Changes to that shape, as the 🤗 example scripts take them: name=value pairs, comma separated, e.g. "
             "hidden_dropout_prob=0,num_hidden_layers=4.")
    model_name_or_path: Optional[str] = setting(  # start from these pretrained weights instead of from scratch
        None, group="model and optimisation",
        help="Start from these pretrained weights instead of from scratch: a folder mlm_tpu made, any save_pretrained "
             "folder (TensorFlow or PyTorch weights) or a Hub name, with its own tokenizer unless --tokenizer is "
             "given. --task mlm continues a masked LM of any family (roberta-base, bert-base-uncased, "
             "xlm-roberta-base, ...; one without a masked-LM head gets a new one); --task electra an ELECTRA "
             "discriminator and its generator (a folder --task electra saved, or with --generator-name-or-path); T5 "
             "tasks, span corruption too, a T5 (t5-small, google/t5-v1_1-base, google/mt5-small); encoder tasks: the "
             "pretrained encoder, its head new; with --delta (any task), the frozen base model.")
    # optimisation
    per_replica_batch_size: int = setting(  # the global batch is what must not change
        8, low=1, changes_result=False, group="model and optimisation",
        help="Examples per replica per step (default: 8).")
    num_epochs: int = setting(1, low=1, group="model and optimisation",
                              help="Passes over the training shards (default: 1).")
    max_steps: Optional[int] = setting(  # stop after this many steps in all (None: the epochs)
        None, low=1, group="model and optimisation", help="Stop after this many steps in all (default: the epochs').")
    # micro-batches per optimizer step (training/step.py); the global batch, which is compared on resuming, counts them
    gradient_accumulation_steps: int = setting(
        1, low=1, high=4096, changes_result=False, group="model and optimisation", metavar="N",
        help="Make each optimizer step of N micro-batches of --per-replica-batch-size examples per replica, their "
             "gradients added up: the global batch is --per-replica-batch-size x replicas x N, trained on the same "
             "examples, masks and loss (over all its targets) as one batch that big, in the memory of one "
             "micro-batch (default: 1).")
    # clip the global norm of the gradient of all weights, summed over the replicas (None: no clipping)
    max_grad_norm: Optional[float] = setting(
        None, low=0, low_open=True, group="model and optimisation",
        help="Clip the gradient's global norm (over every weight, after summing the replicas') to this, as BERT and "
             "🤗's Trainer (1.0) do; each epoch's log line says how many steps it clipped and their norms (default: "
             "no clipping).")
    # ModernBERT's batch_size_warmup_min_size and batch_size_warmup_tokens (training/batch_warmup.py)
    batch_size_warmup_min_size: Optional[int] = setting(
        None, low=1, group="model and optimisation", metavar="EXAMPLES",
        help="Batch-size warm-up, as ModernBERT's batch_size_warmup_min_size: the global batch starts at this many "
             "examples and grows in steps of it to the full one over --batch-size-warmup-tokens, by accumulating more "
             "micro-batches per step (the micro-batch fixed); it must divide the global batch, and the micro-batches "
             "of all replicas must divide it (default: no warm-up).")
    # the tokens (examples x length) over which the batch grows to the full one
    batch_size_warmup_tokens: Optional[int] = setting(
        None, low=1, group="model and optimisation", metavar="TOKENS",
        help="Batch-size warm-up, as ModernBERT's batch_size_warmup_tokens: the tokens (examples x --max-length) "
             "over which the batch grows from --batch-size-warmup-min-size to the full one, each size for an equal "
             "share of the steps (default: no warm-up).")
    optimizer: str = setting(  # adamw | adafactor (training/optimizers.py)
        "adamw", group="model and optimisation", choices=OPTIMIZERS,
        help="adamw: AdamW with decoupled weight decay (default). adafactor: Adafactor as T5X runs it (second moments "
             "factored into row and column means, no first moment, decay rate 0.8, updates clipped to RMS 1.0, steps "
             "scaled by each weight's RMS, relative step size off: the rate is the schedule's); its state is a small "
             "fraction of AdamW's (the log says how many bytes at start). stableadamw: AdamW whose step for each "
             "weight tensor is divided by max(1, RMS(g^2 / v)) (Wortsman et al. 2023; optimi's StableAdamW, which "
             "ModernBERT trains with), an update clipping that stands in for gradient clipping.")
    lr_schedule: str = setting(  # linear | rsqrt | wsd | cosine | constant (training/optimizers.py)
        "linear", group="model and optimisation", choices=SCHEDULES,
        help="linear: warm up from 0, then decay linearly to 0 at the last step (default). rsqrt: T5's inverse square "
             "root: --learning-rate for --warmup-steps steps, then --learning-rate x sqrt(warm-up / step); with "
             "neither given, T5's: 0.01 for 10,000 steps, then 1/sqrt(step). T5X's gin files give it as a base rate: "
             "see --base-learning-rate. wsd: warm up, hold --learning-rate, then decay over the last --decay-ratio of "
             "the steps to --min-learning-rate (--decay-shape); a run stopped before its decay can be continued into "
             "one later (docs: Training, schedules). cosine: warm up, then a half cosine down to --min-learning-rate. "
             "constant: warm up, then hold --learning-rate.")
    # peak learning rate (None: 1e-4 for linear, 1/sqrt(warm-up steps) for rsqrt; a run records the value it used)
    learning_rate: Optional[float] = setting(
        None, low=0, low_open=True, high=10, group="model and optimisation",
        help="Peak learning rate (default: 0.0001 with --lr-schedule linear; 1/sqrt(--warmup-steps) with rsqrt, 0.01 "
             "for T5's 10,000). With rsqrt, at most 0.1: a larger value is T5X's base, --base-learning-rate.")
    # rsqrt: T5X's base_learning_rate B: the rate B / sqrt(max(step, warm-up)), whose peak --learning-rate records
    base_learning_rate: Optional[float] = setting(
        None, low=0, low_open=True, high=1000, changes_result=False, group="model and optimisation", metavar="BASE",
        help="--lr-schedule rsqrt as T5X's gin files give it (factors 'constant * rsqrt_decay', base_learning_rate = "
             "1.0): the rate is BASE / sqrt(max(step, --warmup-steps)), so its peak, held while warming up, is BASE / "
             "sqrt(warm-up): --base-learning-rate 1 with 10,000 warm-up steps is T5's 0.01 then 1/sqrt(step). "
             "Instead of --learning-rate (default: none).")
    weight_decay_rate: float = setting(  # AdamW's decoupled weight decay (Adafactor has none)
        1e-3, low=0, high=1, group="model and optimisation",
        help="AdamW's weight decay; Adafactor has none (default: 0.001).")
    adam_beta1: float = setting(  # AdamW's first-moment decay
        0.9, low=0, high=1, high_open=True, group="model and optimisation",
        help="AdamW's first-moment decay; Adafactor has none (default: 0.9).")
    adam_beta2: float = setting(  # AdamW's second-moment decay
        0.999, low=0, high=1, high_open=True, group="model and optimisation",
        help="AdamW's second-moment decay; Adafactor's is T5X's 1 - step^-0.8 (default: 0.999).")
    adam_epsilon: float = setting(  # AdamW's epsilon, added to sqrt(second moment)
        1e-8, low=0, low_open=True, group="model and optimisation",
        help="AdamW's epsilon, added to the root of the second moment: the larger, the smaller the steps of weights "
             "whose gradients are tiny (default: 1e-08).")
    warmup_ratio: float = setting(  # share of the steps warming up (linear)
        0.05, low=0, high=1, group="model and optimisation",
        help="--lr-schedule linear: share of steps warming up, unless --warmup-steps (default: 0.05).")
    warmup_steps: Optional[int] = setting(  # warm-up steps (None: linear, the ratio's; rsqrt, 10,000)
        None, low=0, group="model and optimisation",
        help="Warm-up steps (default: --warmup-ratio's with linear, 10,000 with rsqrt, as T5's).")
    decay_ratio: float = setting(  # wsd: the share of the steps decaying, at the end (Hägele et al. 2024: 20%)
        0.2, low=0, low_open=True, high=1, group="model and optimisation",
        help="--lr-schedule wsd: the share of the run's steps, at its end, over which the rate decays, in (0, 1] "
             "(default: 0.2, the cooldown Hägele et al. 2024 found to match cosine).")
    decay_shape: str = setting(  # wsd: linear | 1-sqrt
        "1-sqrt", group="model and optimisation", choices=DECAY_SHAPES,
        help="--lr-schedule wsd: the decay's shape: linear, or 1-sqrt (the rate falls as 1 - sqrt(progress); "
             "ModernBERT's and Hägele et al. 2024's) (default: 1-sqrt).")
    min_learning_rate: float = setting(  # wsd and cosine: the rate the decay ends at
        0.0, low=0, group="model and optimisation",
        help="--lr-schedule wsd and cosine: the rate the decay ends at (default: 0).")
    # a published recipe's settings under the file's and the flags' (training/recipes.py); recorded, not replayed
    recipe: Optional[str] = setting(
        None, changes_result=False, group="model and optimisation", metavar="NAME",
        help="Start from a published recipe's settings (optimizer, schedule, rate, batch, steps, masking...): "
             "{recipes}; flags and --config values given override them, and the log lists the recipe's values, "
             "marking those overridden. training_args.json records every resolved value (docs: Recipes) "
             "(default: none).")
    # delta-tuning (mlm_tpu/delta): train a small delta on a frozen --model-name-or-path, saved as PEFT saves it
    delta: Optional[str] = setting(  # lora | ia3 | prompt | prefix | adapter (None: every weight trains)
        None, group="delta-tuning",
        help="lora: low-rank updates beside chosen layers. ia3: learned scaling of keys, values and the feed-forward. "
             "prompt: virtual tokens before the input. prefix: virtual keys and values in T5's decoder "
             "self-attention. adapter: bottleneck MLPs after the feed-forward (and attention). lora and ia3 take T5, "
             "RoBERTa, BERT and ELECTRA; the others T5 only.")
    # the training loop and its outputs
    # compile each replica's training step with XLA (None: on with GPUs, off on CPUs; TPUs always compile)
    jit_compile: Optional[bool] = setting(
        None, changes_result=False, group="hardware",
        help="Compile each replica's training step (forward and backward pass) with XLA (default: on with GPUs, off "
             "on CPUs, where it measured slower; TPUs compile everything anyway).")
    steps_per_execution: int = setting(  # steps per call into the device (TPUs: 100s)
        1, low=1, changes_result=False, group="hardware",
        help="Training steps per call into the device (default: 1; 100s suit TPUs); --backup-steps must be a "
             "multiple of it.")
    backup_steps: Optional[int] = setting(  # backup every N steps (None: epochs)
        None, low=1, changes_result=False, group="output",
        help="Write the resumable backup every N optimizer steps, a multiple of --steps-per-execution (default: at "
             "each epoch's end).")
    logging_steps: Optional[int] = setting(  # log the loss every N steps
        None, low=1, changes_result=False, group="output",
        help="Log the mean training loss of every N steps to TensorBoard (default: once per epoch); validation is "
             "logged at each epoch's end, against the step reached.")
    # the peak TFLOP/s of each replica's device, for MFU in the logs (None: the table's, training/throughput.py)
    peak_tflops: Optional[float] = setting(
        None, low=0, low_open=True, changes_result=False, group="hardware",
        help="The peak TFLOP/s of each replica's device (a chip; on TPU v2 and v3, one of its two cores), that the "
             "logs' MFU divides the model's FLOPs per second by (default: TPU v2-v6e, A100, H100, H200 and L4 are "
             "known by name, in bfloat16; on other devices, CPUs among them, MFU is unknown).")
    hub_model_id: Optional[str] = setting(  # push the output folder here each epoch
        None, changes_result=False, group="output",
        help="Push the output folder to this 🤗 Hub repo each epoch (in the background).")
    # resume even where a setting that decides the result differs from the backup's (recorded in training_args.json)
    allow_changed_settings: bool = setting(
        False, changes_result=False, group="output",
        help="Resume from --output-dir's backup even though a setting that decides the result (learning rate, "
             "schedule, batch, data, model, seed, task) differs from the backup's: the change is recorded, with the "
             "step it took effect at, in training_args.json. Without it such a resume is refused; settings that do "
             "not change the result (logging, backups, push, hardware) may change freely.")
    hardware: HardwareConfig = field(default_factory=HardwareConfig)

    def __post_init__(self):
        if isinstance(self.train_dataset, (tuple, list)) and len(self.train_dataset) == 1:
            self.train_dataset = self.train_dataset[0]  # one folder is written as before: a string

    @property
    def train_datasets(self) -> Tuple[str, ...]:
        return (self.train_dataset,) if isinstance(self.train_dataset, str) else tuple(self.train_dataset)


@dataclass
class EvaluationConfig(MaskingSettings):
    """What `python -m mlm_tpu.evaluate` does; the flags of the same names fill it (a masked LM's masking: those of
    MaskingSettings)."""

    model: str  # the trained model: train.py's --output-dir, a save_pretrained folder or a Hub name
    eval_dataset: str  # folder (local or gs://) of shards to evaluate on
    base_model: Optional[str] = None  # an adapter folder's base (None: its adapter_config.json's)
    max_length: Optional[int] = setting(None, low=8)  # checked against the shards (None: what they hold)
    per_replica_batch_size: int = setting(8, low=1, changes_result=False)  # the global batch is what must not change  # masks depend on it: compare runs made with the same
    seed: int = setting(42, low=0, high=MAX_SEED)  # of the masks (or spans)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
