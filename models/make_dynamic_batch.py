"""Give a YOLO ONNX export a dynamic batch axis: `[1, 3, H, W]` in becomes `[N, 3, H, W]`.

jetdetect batches the newest frame of each camera into one engine run when the model's batch
axis is dynamic (`[engine] max_batch`). ultralytics exports one with `dynamic=True`; this script
turns an export made with batch 1 into one, without retraining or re-exporting:

- the input's and outputs' first dimension becomes the symbol `batch`;
- every Reshape whose target shape starts with the batch (`[1, ...]`) gets `0` there instead,
  ONNX's "copy this dimension from the input", so it follows the batch;
- the stored intermediate shapes (value_info, all of batch 1) are dropped: runtimes infer them
  for the batch they run (tract cannot unify a stored symbol with the batch it plans for).

It refuses a graph with anything else that fixes the batch (a Resize by `sizes`, an Expand or
a ConstantOfShape), so what it writes runs at every batch size. Check the result with
`--check N`: the batch of N identical inputs must give N copies of the batch-1 output.

    .venv-models/bin/python models/make_dynamic_batch.py models/obstacles-v8.onnx models/obstacles-v8-batch.onnx --check 4
"""

import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def make_dynamic(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    for n in g.node:
        if n.op_type in ("Expand", "ConstantOfShape", "Tile"):
            sys.exit(f"{n.name}: {n.op_type} may fix the batch; not converted")
        if n.op_type == "Resize" and len(n.input) > 3 and n.input[3]:
            sys.exit(f"{n.name}: Resize by sizes fixes the batch; not converted")
        if n.op_type != "Reshape":
            continue
        name = n.input[1]
        if name in inits:
            shape = numpy_helper.to_array(inits[name]).copy()
            if shape.size and shape[0] == 1:
                shape[0] = 0
                inits[name].CopyFrom(numpy_helper.from_array(shape.astype(np.int64), name))
        elif name in consts:
            t = consts[name].attribute[0].t
            shape = numpy_helper.to_array(t).copy()
            if shape.size and shape[0] == 1:
                shape[0] = 0
                t.CopyFrom(numpy_helper.from_array(shape.astype(np.int64), t.name))
        else:
            sys.exit(f"{n.name}: its shape is computed in the graph; not converted")
        for a in n.attribute:
            if a.name == "allowzero" and a.i == 1:
                sys.exit(f"{n.name}: allowzero=1 (0 would mean an empty axis); not converted")
    for v in list(g.input) + list(g.output):
        d = v.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_param = "batch"
    del g.value_info[:]
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True))
    return model


def check(path: str, n: int) -> None:
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    shape = s.get_inputs()[0].shape
    rng = np.random.default_rng(7)
    one = rng.random((1, 3, shape[2], shape[3]), dtype=np.float32)
    many = np.concatenate([one * (k + 1) / n for k in range(n)])
    out = s.run(None, {s.get_inputs()[0].name: many})[0]
    for k in range(n):
        single = s.run(None, {s.get_inputs()[0].name: many[k : k + 1]})[0]
        worst = float(np.abs(out[k : k + 1] - single).max())
        print(f"batch {n}, image {k}: largest difference from its batch-1 run {worst:.2e}")
        if worst > 1e-3:
            sys.exit("the batched output differs from the single runs")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--check", type=int, default=0, metavar="N", help="run a batch of N against N single runs")
    a = p.parse_args()
    model = make_dynamic(onnx.load(a.src))
    onnx.save(model, a.dst)
    print(f"{a.dst}: input {[d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]}")
    if a.check:
        check(a.dst, a.check)


if __name__ == "__main__":
    main()
