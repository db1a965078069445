"""Answers for the checks of notebooks/13_my_topic.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases


def counter_with_closure(module, counts):  # noqa: ANN001, ANN201
    def hook(*args):  # noqa: ANN002, ANN202
        counts["calls"] = counts.setdefault("calls", 0) + 1

    return module.register_forward_hook(hook)


def counter_no_handle(module, counts):  # noqa: ANN001, ANN201
    module.register_forward_hook(lambda m, i, o: counts.__setitem__("calls", counts.get("calls", 0) + 1))


def counter_once(module, counts):  # noqa: ANN001, ANN201
    counts["calls"] = 1
    return module.register_forward_hook(lambda m, i, o: None)


def mean_with_float(module, means):  # noqa: ANN001, ANN201
    return module.register_forward_hook(lambda m, i, o: means.append(float(o.sum() / o.numel())))


def mean_tensor(module, means):  # noqa: ANN001, ANN201
    return module.register_forward_hook(lambda m, i, o: means.append(o.mean()))


def mean_of_input(module, means):  # noqa: ANN001, ANN201
    return module.register_forward_hook(lambda m, i, o: means.append(i[0].mean().item()))


def children_with_list(model):  # noqa: ANN001, ANN201
    counts, handles = {}, []
    for name, child in model.named_children():
        handles.append(child.register_forward_hook(
            lambda m, i, o, name=name: counts.__setitem__(name, counts.get(name, 0) + 1)))
    return counts, handles


def children_late_binding(model):  # noqa: ANN001, ANN201
    counts, handles = {}, []
    for name, child in model.named_children():
        handles.append(child.register_forward_hook(lambda m, i, o: counts.__setitem__(name, counts.get(name, 0) + 1)))
    return counts, handles


def children_no_pair(model):  # noqa: ANN001, ANN201
    return {}


CASES = {
    "13.1": Cases(
        right=[counter_with_closure],
        wrong=[(counter_no_handle, "return the handle"), (counter_once, "not 2")],
    ),
    "13.2": Cases(
        right=[mean_with_float],
        wrong=[(mean_tensor, "Python float"), (mean_of_input, "not the mean")],
    ),
    "13.3": Cases(
        right=[children_with_list],
        wrong=[(children_late_binding, "by its name"), (children_no_pair, "a pair")],
    ),
}
