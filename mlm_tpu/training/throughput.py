"""Speed in the units the field compares: tokens per second (global and per replica), model FLOPs per token and
model-FLOPs utilisation (MFU), for each epoch's log line and TensorBoard.

Tokens are every position a step runs through the model, padding included: global batch x length, and for T5 the
encoder's and the decoder's positions both (flops.py, ExampleCost.tokens). MFU is the model FLOPs done per second
(flops.py: PaLM's count, the work of the model rather than of the device) over the peak of the devices: the table
below, for the device TensorFlow reports, or --peak-tflops. A replica is one chip, except on TPU v2 and v3, whose
chips hold two TensorCores that TensorFlow drives as two replicas.
"""

import os
import re
import urllib.request
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from mlm_tpu.training.flops import ExampleCost

# Dense bfloat16 peaks per chip, in TFLOP/s (the datasheets' figures "with sparsity" are twice these), and the
# replicas TensorFlow makes of a chip. Matched in this order against the device's name in lower case (TPUs: "tpu " and
# their accelerator type, "tpu v4-8", or JAX's device kind, "tpu v5 lite").
PEAKS: Tuple[Tuple[str, str, float, int], ...] = (  # (pattern, name, TFLOP/s per chip, replicas per chip)
    (r"^tpu.*\bv2\b", "TPU v2", 45.0, 2),  # cloud.google.com/tpu/docs/v2: 45 TFLOPs per chip (bf16), 2 TensorCores
    (r"^tpu.*\bv3\b", "TPU v3", 123.0, 2),  # cloud.google.com/tpu/docs/v3: 123 TFLOPs per chip (bf16), 2 TensorCores
    (r"^tpu.*\bv4\b", "TPU v4", 275.0, 1),  # cloud.google.com/tpu/docs/v4: 275 TFLOPs per chip; megacore: 1 device
    (r"^tpu.*(\bv5 ?lite|\bv5e\b)", "TPU v5e", 197.0, 1),  # cloud.google.com/tpu/docs/v5e: 197 TFLOPs per chip (bf16)
    (r"^tpu.*\bv5p?\b", "TPU v5p", 459.0, 1),  # cloud.google.com/tpu/docs/v5p: 459 TFLOPs per chip (bf16); megacore
    (r"^tpu.*(\bv6 ?lite|\bv6e\b)", "TPU v6e", 918.0, 1),  # cloud.google.com/tpu/docs/v6e: 918 TFLOPs per chip (bf16)
    (r"\ba100\b", "NVIDIA A100", 312.0, 1),  # NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity)
    (r"\bh100\b.*\bpcie\b", "NVIDIA H100 PCIe", 756.0, 1),  # NVIDIA H100 datasheet: PCIe, BF16 1,513 with sparsity
    (r"\bh100\b.*\bnvl\b", "NVIDIA H100 NVL", 835.0, 1),  # NVIDIA H100 datasheet: NVL, BF16 1,671 with sparsity
    (r"\bh[12]00\b", "NVIDIA H100/H200 SXM", 989.0, 1),  # NVIDIA H100 and H200 datasheets: SXM, BF16 1,979 with sparsity
    (r"\bl4\b", "NVIDIA L4", 121.0, 1),  # NVIDIA L4 datasheet: BF16 Tensor Core 242 TFLOPS with sparsity
)
TPU_TYPE_VARIABLES = ("TPU_ACCELERATOR_TYPE", "ACCELERATOR_TYPE")  # set on TPU VMs and by GKE (e.g. "v4-8")
TPU_METADATA = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/accelerator-type"


@dataclass(frozen=True)
class Peak:
    """What MFU is measured against: the peak TFLOP/s of one replica's device, and where the figure comes from."""

    tflops_per_replica: float
    source: str  # "TPU v4", "--peak-tflops", ...


def peak_of(device: str) -> Optional[Peak]:
    """The bfloat16 peak of a device by the name TensorFlow or the TPU's metadata gives it ("TPU v4", "v5litepod-16",
    "NVIDIA A100-SXM4-40GB", ...); None for others (CPUs among them)."""
    name = device.lower()
    for pattern, known, per_chip, replicas_per_chip in PEAKS:
        if re.search(pattern, name):
            return Peak(per_chip / replicas_per_chip, known)
    return None


def tpu_type(read_metadata=None) -> Optional[str]:
    """The TPU's accelerator type ("v3-8", "v5litepod-16", ...): from the environment, else from the TPU VM's
    metadata server (None off Google Cloud)."""
    for variable in TPU_TYPE_VARIABLES:
        if os.environ.get(variable):
            return os.environ[variable]
    try:
        return (read_metadata or _read_metadata)(TPU_METADATA) or None
    except OSError:
        return None


def _read_metadata(url: str) -> str:
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=2) as response:
        return response.read().decode().strip()


def device_name(on_tpu: bool) -> str:
    """What runs the replicas: the TPU's type, the first GPU's name, or "CPU"."""
    import tensorflow as tf

    if on_tpu:
        return f"TPU {tpu_type() or 'of unknown type'}"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU of unknown type")
    return "CPU"


def find_peak(peak_tflops: Optional[float], on_tpu: bool) -> Tuple[Optional[Peak], str]:
    """(the peak MFU is measured against, or None, and the device's name); `peak_tflops` (--peak-tflops) wins."""
    device = device_name(on_tpu)
    if peak_tflops:
        return Peak(peak_tflops, "--peak-tflops"), device
    return peak_of(device), device


@dataclass(frozen=True)
class Throughput:
    """An epoch's speed: `examples` trained in `seconds` by `replicas` replicas."""

    examples: int
    seconds: float
    replicas: int
    cost: Optional[ExampleCost]  # None: the task does not count its FLOPs
    peak: Optional[Peak]
    device: str

    @property
    def tokens_per_second(self) -> Optional[float]:
        return self.examples * self.cost.tokens / self.seconds if self.cost else None

    @property
    def model_tflops_per_second(self) -> Optional[float]:
        return self.examples * self.cost.flops / self.seconds / 1e12 if self.cost else None

    @property
    def mfu(self) -> Optional[float]:
        if self.cost is None or self.peak is None:
            return None
        return self.model_tflops_per_second / (self.peak.tflops_per_replica * self.replicas)

    def describe(self) -> str:
        """The figures in words, for the epoch's log line."""
        words = f"{self.examples / self.seconds:,.0f} examples/s"
        if self.cost is None:
            return words
        words += (f", {self.tokens_per_second:,.0f} tokens/s ({self.tokens_per_second / self.replicas:,.0f} per "
                  f"replica), {_with_prefix(self.cost.flops_per_token)}FLOP per token")
        if self.mfu is None:
            return f"{words}, MFU unknown (no peak known for {self.device}: pass --peak-tflops)"
        return (f"{words}, MFU {self.mfu:.1%} of {self.peak.tflops_per_replica:g} TFLOP/s per replica "
                f"({self.peak.source})")

    def scalars(self) -> Dict[str, float]:
        """What TensorBoard gets (MFU only where it is known)."""
        found = {"examples_per_second": self.examples / self.seconds}
        if self.cost:
            found.update(tokens_per_second=self.tokens_per_second,
                         tokens_per_second_per_replica=self.tokens_per_second / self.replicas,
                         model_tflops_per_second=self.model_tflops_per_second)
        if self.mfu is not None:
            found["mfu"] = self.mfu
        return found


def _with_prefix(value: float) -> str:
    """1.23e9 -> "1.23 G"."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:,.0f} "
