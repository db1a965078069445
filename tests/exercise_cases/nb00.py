"""Answers for the checks of notebooks/00_start_here.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases, answer, mutants

RECORDER = """
def attach_shape_recorder(layer, shapes):
    def hook(module, args, output):
        shapes.append(tuple(output.shape))

    return layer.register_forward_hook(hook)
"""
RECORD = "        shapes.append(tuple(output.shape))"

CASES = {
    "00.1": Cases(
        right=[answer("""
                   class ShapeLog:  # a different design: a callable object as the hook
                       def __init__(self, shapes):
                           self.shapes = shapes

                       def __call__(self, module, args, output):
                           self.shapes += [tuple(output.size())]

                   def attach_shape_recorder(layer, shapes):
                       return layer.register_forward_hook(ShapeLog(shapes))
                   """),
               answer("""
                   def attach_shape_recorder(layer, shapes):  # torch.Size is a tuple: fine
                       return layer.register_forward_hook(lambda m, a, out: shapes.append(out.shape))
                   """)],
        wrong=mutants(
            RECORDER,
            ("    return layer", "    layer", "returned None: return the handle"),
            ("    return layer.register_forward_hook(hook)", "    return [layer.register_forward_hook(hook)]",
             "returned list"),  # a list has a remove() too, but is no handle
            ("register_forward_hook(hook)", "register_forward_pre_hook(lambda m, args: shapes.append(tuple(args[0].shape)))",
             "No forward hook on the layer you were given (found one forward pre-hook on it)"),
            ("    return layer.register_forward_hook(hook)",  # the with block of the cell before removes it
             "    with layer.register_forward_hook(hook) as handle:\n        return handle", "already gone"),
            ("output.shape", "args[0].shape", "input"),
            ("tuple(output.shape)", "output", "not the output itself"),
            (RECORD, "        if not shapes:\n    " + RECORD, "one shape per forward"),
            (RECORD, RECORD + "\n        return output.abs()", "must return None"),
            ("    return layer", "    layer.register_forward_hook(lambda m, a, out: None)\n    return layer",
             "Expected exactly one forward hook, on the layer you were given; found 2 forward hooks on it."),
            ("    return layer", "    layer.register_forward_pre_hook(lambda m, args: None)\n    return layer",
             "found one forward hook and one forward pre-hook on it."),
            (RECORD, "        return shapes.append(tuple(output.shape)) or 'recorded'", "in place of the layer's output"),
            (RECORD, RECORD + "\n        return output.shape", "torch.Size, not a tensor"),
            ("tuple(output.shape)", "list(output.shape)", "asks for tuples"),
        ) + [(answer("""
                  import gc

                  def attach_shape_recorder(layer, shapes):  # also hooks the model's last layer, found through gc
                      model = next(m for m in gc.get_objects()
                                   if isinstance(m, nn.Sequential) and any(c is layer for c in m.children()))
                      model[-1].register_forward_hook(lambda m, a, out: None)
                      return layer.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)))
                  """), "found one forward hook on it, and one forward hook on submodule '3'.")],
    ),
    "00.2": Cases(
        right=[2, 2.0],
        wrong=[(0, "did not replace the first"), (4, "did take a hook off"), (1, "the forward passes"),
               ("2", "whole number"), (2.5, "whole number")],
    ),
}
