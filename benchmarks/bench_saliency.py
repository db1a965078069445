"""Time course_utils.saliency against captum and pytorch-grad-cam; print medians and ratios.

All methods run interleaved in one process (round-robin per repeat, so machine noise hits all alike), on one
thread, on torchvision resnet18 and vgg11 (random weights: speed does not depend on them), batch 1 and 8.
pytorch-grad-cam's Guided Backprop explains only the first sample of a batch, so it is called once per sample.

Usage: ``.venv/bin/python benchmarks/bench_saliency.py [--repeats 5] [--size 224]``  (or ``make bench``)
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial

import torch
import torchvision
from captum.attr import GuidedBackprop
from pytorch_grad_cam import GuidedBackpropReLUModel

from course_utils.libraries import captum_grad_cam, pytorch_grad_cam
from course_utils.saliency import grad_cam, guided_backprop

LAYERS = {"resnet18": "layer4", "vgg11": "features.20"}


def library_guided_backprop(model: torch.nn.Module, x: torch.Tensor, targets: list[int]) -> list[object]:
    explainer = GuidedBackpropReLUModel(model, device="cpu")
    return [explainer(x[i : i + 1].clone(), target_category=t) for i, t in enumerate(targets)]


def time_interleaved(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    for call in calls.values():  # warm-up
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"torch {torch.__version__}, 1 thread, input {args.size}x{args.size}, median of {args.repeats}")
    print(f"{'model':9} {'batch':>5}  {'method':15} {'ours':>8} {'captum':>8} {'grad-cam':>9}  "
          f"{'captum/ours':>11} {'grad-cam/ours':>13}")
    for name, layer in LAYERS.items():
        torch.manual_seed(0)
        for batch in (1, 8):
            x = torch.randn(batch, 3, args.size, args.size)
            targets = list(range(3, 3 + batch))
            # pytorch-grad-cam replaces nn.ReLU modules while it runs (and puts back ReLU(inplace=False)):
            # give every library its own copy so none can change what another one times
            models = {key: getattr(torchvision.models, name)(weights=None).eval() for key in ("ours", "captum", "lib")}
            for key in ("captum", "lib"):
                models[key].load_state_dict(models["ours"].state_dict())
            gbp = time_interleaved({
                "ours": partial(guided_backprop, models["ours"], x, targets),
                "captum": partial(GuidedBackprop(models["captum"]).attribute, x, target=targets),
                "lib": partial(library_guided_backprop, models["lib"], x, targets),
            }, args.repeats)
            cam = time_interleaved({
                "ours": partial(grad_cam, models["ours"], layer, x, targets),
                "captum": partial(captum_grad_cam, models["captum"], layer, x, targets),
                "lib": partial(pytorch_grad_cam, models["lib"], layer, x, targets),
            }, args.repeats)
            for method, t in (("Guided Backprop", gbp), ("Grad-CAM", cam)):
                print(f"{name:9} {batch:>5}  {method:15} {t['ours']:8.3f} {t['captum']:8.3f} {t['lib']:9.3f}  "
                      f"{t['captum'] / t['ours']:11.2f} {t['lib'] / t['ours']:13.2f}", flush=True)


if __name__ == "__main__":
    main()
