"""Answers for the checks of notebooks/00_start_here.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases


class ShapeLog:
    """A different design: a callable object as the hook."""

    def __init__(self, shapes):  # noqa: ANN001
        self.shapes = shapes

    def __call__(self, module, args, output):  # noqa: ANN001, ANN204
        self.shapes += [tuple(output.size())]


def recorder_as_object(layer, shapes):  # noqa: ANN001, ANN201
    return layer.register_forward_hook(ShapeLog(shapes))


def recorder_keeping_size(layer, shapes):  # noqa: ANN001, ANN201 -- torch.Size is a tuple: fine
    return layer.register_forward_hook(lambda m, a, out: shapes.append(out.shape))


def recorder_no_handle(layer, shapes):  # noqa: ANN001, ANN201
    layer.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)))


def recorder_of_inputs(layer, shapes):  # noqa: ANN001, ANN201 -- a pre-hook sees the input
    return layer.register_forward_pre_hook(lambda m, args: shapes.append(tuple(args[0].shape)))


def recorder_of_input_in_forward_hook(layer, shapes):  # noqa: ANN001, ANN201
    return layer.register_forward_hook(lambda m, args, out: shapes.append(tuple(args[0].shape)))


def recorder_of_tensors(layer, shapes):  # noqa: ANN001, ANN201
    return layer.register_forward_hook(lambda m, a, out: shapes.append(out))


def recorder_first_only(layer, shapes):  # noqa: ANN001, ANN201
    def hook(m, a, out):  # noqa: ANN001, ANN202
        if not shapes:
            shapes.append(tuple(out.shape))

    return layer.register_forward_hook(hook)


def recorder_that_changes(layer, shapes):  # noqa: ANN001, ANN201
    def hook(m, a, out):  # noqa: ANN001, ANN202
        shapes.append(tuple(out.shape))
        return out.abs()

    return layer.register_forward_hook(hook)


def recorder_on_parent_too(layer, shapes):  # noqa: ANN001, ANN201 -- two hooks, one handle
    layer.register_forward_hook(lambda m, a, out: None)
    return layer.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)))



def recorder_returning_a_string(layer, shapes):  # noqa: ANN001, ANN201 -- the lambda's value replaces the output
    return layer.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)) or "recorded")


def recorder_returning_the_shape(layer, shapes):  # noqa: ANN001, ANN201
    def hook(m, a, out):  # noqa: ANN001, ANN202
        shapes.append(tuple(out.shape))
        return out.shape

    return layer.register_forward_hook(hook)


def recorder_of_lists(layer, shapes):  # noqa: ANN001, ANN201 -- a list where the task asks for a tuple
    return layer.register_forward_hook(lambda m, a, out: shapes.append(list(out.shape)))


CASES = {
    "00.1": Cases(
        right=[recorder_as_object, recorder_keeping_size],
        wrong=[
            (recorder_no_handle, "return the handle"),
            (recorder_of_inputs, "No forward hook"),
            (recorder_of_input_in_forward_hook, "input"),
            (recorder_of_tensors, "not the output itself"),
            (recorder_first_only, "one shape per forward"),
            (recorder_that_changes, "must return None"),
            (recorder_on_parent_too, "exactly one forward hook"),
            (recorder_returning_a_string, "in place of the layer's output"),
            (recorder_returning_the_shape, "torch.Size, not a tensor"),
            (recorder_of_lists, "asks for tuples"),
        ],
    ),
    "00.2": Cases(
        right=[2, 2.0],
        wrong=[
            (0, "did not replace the first"),
            (4, "did take a hook off"),
            (1, "the forward passes"),
            ("2", "whole number"),
            (2.5, "whole number"),
        ],
    ),
}
