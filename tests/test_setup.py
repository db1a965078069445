"""setup_notebook seeds, fixes threads and print options; print_warnings shows warnings as one line."""

from __future__ import annotations

import warnings

import pytest
import torch

from course_utils.machinery.messages import in_language
from course_utils.machinery.notebook import environment_line, print_warnings, setup_notebook


def test_setup_is_deterministic_and_single_threaded() -> None:
    line = setup_notebook(seed=3)
    first = torch.randn(4)
    setup_notebook(seed=3)
    assert torch.equal(first, torch.randn(4))
    assert torch.get_num_threads() == 1
    # No Python version: stored outputs are the same on every supported Python (3.11-3.13).
    assert line == "torch 2.14.1 | torchvision 0.29.1 | CPU, 1 thread | seed 3"
    assert "+" not in line  # no build suffix (cu130 / cpu): the same line on every build
    with in_language("zh"):  # the Chinese notebooks' first output: the words in Chinese, the versions as they are
        assert setup_notebook(seed=3) == "torch 2.14.1 | torchvision 0.29.1 | CPU，1 个线程 | 随机种子 3"


def test_thread_count_is_a_parameter_and_one_is_the_default() -> None:
    try:
        line = setup_notebook(threads=2)
        assert torch.get_num_threads() == 2
        assert "CPU, 2 threads" in line  # the line reports the count actually set
        setup_notebook()
        assert torch.get_num_threads() == 1  # the default goes back to the stored outputs' one thread
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("threads", [0, -2, 1.5, "2", True])
def test_bad_thread_count_is_rejected_before_anything_changes(threads: object) -> None:
    setup_notebook()
    with pytest.raises(ValueError, match="threads must be a positive int"):
        setup_notebook(threads=threads)  # type: ignore[arg-type]
    assert torch.get_num_threads() == 1


def test_print_options_are_readable() -> None:
    setup_notebook()
    assert str(torch.tensor([0.000012345, 2.0])) == "tensor([0.000, 2.000])"


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_bad_seed_is_rejected(seed: object) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        setup_notebook(seed)  # type: ignore[arg-type]


def test_print_warnings_prints_category_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    with print_warnings() as caught:
        warnings.warn("first\n   second", FutureWarning, stacklevel=1)
    assert len(caught) == 1
    assert capsys.readouterr().out == "FutureWarning: first second\n"


def test_print_warnings_sees_the_non_leaf_grad_warning(capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.ones(2, requires_grad=True)
    z = x * 2
    with print_warnings():
        assert z.grad is None
    out = capsys.readouterr().out
    assert out.startswith("UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is being accessed")
    assert "Triggered internally" not in out and "/" not in out.split("pull/30531")[-1]


def test_print_warnings_counts_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    with print_warnings():
        for _ in range(3):
            warnings.warn("again", UserWarning, stacklevel=1)
    assert capsys.readouterr().out == "UserWarning: again [3 times]\n"


def test_print_warnings_still_prints_when_the_block_raises(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyError):
        with print_warnings():
            warnings.warn("before the error", UserWarning, stacklevel=1)
            raise KeyError("x")
    assert "UserWarning: before the error" in capsys.readouterr().out


def test_environment_line_without_seed() -> None:
    assert "seed" not in environment_line()


def test_environment_line_names_the_torchvision_that_imports() -> None:
    # read from the installed package's metadata (no import): it must be the version that `import torchvision` gets
    import torchvision

    assert f"| torchvision {torchvision.__version__.split('+')[0]} |" in environment_line()
