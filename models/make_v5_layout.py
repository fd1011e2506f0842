#!/usr/bin/env python3
"""Re-head a YOLOv8-layout ONNX model into the YOLOv5 output layout.

    python models/make_v5_layout.py models/obstacles-v8.onnx models/obstacles-v5.onnx

YOLOv8 outputs [1, 4+C, N] (box, class scores); YOLOv5 outputs [1, N, 5+C]
(box, objectness, class scores) and its score is objectness x class score.
This appends ONNX operators to the network's output:

    t      = Transpose(out, [0, 2, 1])           # [1, N, 4+C]
    box    = t[..., :4]; cls = t[..., 4:]
    obj    = sqrt(max(cls))                      # objectness
    cls5   = cls / max(obj, 1e-9)                # so that obj * cls5 == cls
    output = Concat(box, obj, cls5)              # [1, N, 5+C]

so the v5 model is the same detector in the other layout: decoding it the
YOLOv5 way must give the same detections as decoding the original the YOLOv8
way, which the tests check. The split into objectness and class score is
arbitrary but keeps objectness >= score, as in real YOLOv5 outputs.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(src: str, dst: str) -> None:
    model = onnx.load(src)
    g = model.graph
    out = g.output[0]
    dims = [d.dim_value for d in out.type.tensor_type.shape.dim]
    assert len(dims) == 3 and dims[0] == 1 and dims[1] < dims[2], f"not a YOLOv8 output: {dims}"
    c4, n = dims[1], dims[2]
    classes = c4 - 4
    name = out.name

    def const(nm, arr):
        g.initializer.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    starts_box, ends_box = const("v5_s0", np.array([0], np.int64)), const("v5_e4", np.array([4], np.int64))
    starts_cls, ends_cls = const("v5_s4", np.array([4], np.int64)), const("v5_eC", np.array([c4], np.int64))
    axis = const("v5_ax", np.array([2], np.int64))
    eps = const("v5_eps", np.array(1e-9, np.float32))
    nodes = [
        helper.make_node("Transpose", [name], ["v5_t"], perm=[0, 2, 1]),
        helper.make_node("Slice", ["v5_t", starts_box, ends_box, axis], ["v5_box"]),
        helper.make_node("Slice", ["v5_t", starts_cls, ends_cls, axis], ["v5_cls"]),
        helper.make_node("ReduceMax", ["v5_cls"], ["v5_max"], axes=[2], keepdims=1),
        helper.make_node("Sqrt", ["v5_max"], ["v5_obj"]),
        helper.make_node("Max", ["v5_obj", eps], ["v5_den"]),
        helper.make_node("Div", ["v5_cls", "v5_den"], ["v5_cls5"]),
        helper.make_node("Concat", ["v5_box", "v5_obj", "v5_cls5"], ["output0_v5"], axis=2),
    ]
    g.node.extend(nodes)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("output0_v5", TensorProto.FLOAT, [1, n, 5 + classes]))
    # ReduceMax with the `axes` attribute needs opset <= 17.
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            assert op.version <= 17, f"opset {op.version}: re-export with opset=17"
    meta = {p.key: p.value for p in model.metadata_props}
    meta["jetdetect_layout"] = "yolov5 (re-headed from a YOLOv8 export by models/make_v5_layout.py)"
    del model.metadata_props[:]
    for k, v in meta.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    print(f"wrote {dst}: output [1, {n}, {5 + classes}]")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
