#!/usr/bin/env python3
"""Small exports of every ultralytics detection family, with ultralytics' own predictions on them.

    .venv-models/bin/python tests/reference/make_families.py

For each family (YOLOv5u, v8, v9, v10, 11, 12, YOLO26) the network is built by ultralytics from its
own model definition (`cfg/models/*/*.yaml`, at its smallest scale, narrower where the family's
blocks allow: 1 to 6 MB a file) with four classes, and exported to ONNX at 160 x 160 with ultralytics' own
exporter (its default opset, 18 with torch 2.15), in the forms users make today:

  * default (`nms` unset): `[1, 4 + C, N]`, every family;
  * `nms=False` on the NMS-free heads (YOLOv10, YOLO26): end-to-end, `[1, 300, 6]`;
  * `nms=True` (NMS inside the graph, thresholds baked in): `[1, 100, 6]`;
  * `dynamic=True`: symbolic batch, height and width;
  * `quantize=16` (FP16 weights; exported on the CPU, so input and output stay FP32);

and RT-DETR (`rtdetr-l.yaml`, narrowed: `[1, 300, 6]`, normalised `cx cy w h score class`, its input
stretched by ultralytics' predictor instead of letterboxed).

The weights are ultralytics' random initialisation (nothing is downloaded or trained), with the class
branch's spread and bias set so that at least 3 % of the candidates pass the 0.25 threshold on every
fixture image (batch norms' statistics taken from the fixtures, calibrate()): every export then gives
many overlapping boxes, which is what tests decoding and NMS. `references.json` holds, for each
export and each fixture image, what ultralytics' own `predict` returns (conf 0.25, iou 0.45, max_det
100): class, score and corners in image pixels. jetdetect's tests (tests/it/families.rs) compare
their own decoding of the same files against it, box by box, on tract and on ONNX Runtime.
"""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-cfg-"))

import torch  # noqa: E402
import yaml  # noqa: E402
from ultralytics import RTDETR, YOLO, __version__  # noqa: E402
from ultralytics.utils import ROOT as UL_ROOT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "reference" / "families"
# PNG fixtures with letterbox padding: above and below (landscape), and left and right (portrait, the
# landscape one turned, written by this script). Not scene_480x480.png: under these random weights its
# features stand far from the others' (every anchor of it scores 0.999+ wherever the others score
# anything), and saturated scores tie in float32, where the order (and so NMS and top-k) is each
# implementation's own. Not the JPEG: OpenCV's and jetdetect's decoders differ by a level here and
# there, which the random weights amplify; tests/it/reference.rs compares that image with the
# trained model.
FIXTURES = ROOT / "tests" / "fixtures"
IMAGES = [FIXTURES / "images" / "scene_301x211.png", FIXTURES / "portrait" / "scene_211x301.png",
          FIXTURES / "images" / "scene_640x360.png"]
IMGSZ, CONF, IOU, MAX_DET = 160, 0.25, 0.45, 100
NAMES = {0: "box", 1: "ball", 2: "cone", 3: "person"}
FAMILIES = {  # name: (yaml under cfg/models, scale key, width divisor, max channels)
    # The smallest each family's blocks allow, to keep the files small: the attention blocks need
    # 128 channels where they sit (PSA, C2PSA: a head per 64 of half of them), YOLO12's area
    # attention multiples of 32 in every block (so its full `n` width, capped at 512); YOLOv9t has
    # no scale table (its hidden widths are written out) and is built as it is.
    "yolov5u": ("v5/yolov5.yaml", "n", 4, 1024),
    "yolov8": ("v8/yolov8.yaml", "n", 4, 1024),
    "yolov9": ("v9/yolov9t.yaml", None, 1, None),
    "yolov10": ("v10/yolov10n.yaml", "n", 2, 1024),
    "yolo11": ("11/yolo11.yaml", "n", 2, 1024),
    "yolo12": ("12/yolo12.yaml", "n", 1, 512),
    "yolo26": ("26/yolo26.yaml", "n", 2, 1024),
    # RT-DETR's HGNet blocks and decoder take their widths from their arguments, not the scale:
    # rtdetr_yaml() narrows them.
    "rtdetr": ("rt-detr/rtdetr-l.yaml", "l", 8, 1024),
}
# (family, export name, export arguments)
EXPORTS = [(f, "default", {}) for f in FAMILIES] + [
    ("yolov10", "e2e", {"nms": False}),
    ("yolo26", "e2e", {"nms": False}),
    ("yolov8", "nms", {"nms": True, "conf": CONF, "iou": IOU, "max_det": MAX_DET}),
    ("yolo11", "dynamic", {"dynamic": True}),
    ("yolo11", "fp16", {"quantize": 16}),
    ("yolo26", "e2e-dynamic", {"nms": False, "dynamic": True}),
    ("rtdetr", "default", {}),
]


def rtdetr_yaml(cfg: dict, divisor: int) -> dict:
    """rtdetr-l.yaml narrowed: HGNet's stem and blocks, the encoder's feed-forward and the decoder
    (hidden 64, 4 heads, 2 layers, feed-forward 256) by hand, the rest by the width multiple."""
    depth, width, max_channels = cfg["scales"]["l"]
    cfg["scales"] = {"l": [0.33, width / divisor, max_channels]}
    for layer in cfg["backbone"]:
        if layer[2] in ("HGStem", "HGBlock"):
            layer[3][0] //= divisor
            layer[3][1] //= divisor
    for layer in cfg["head"]:
        if layer[2] == "AIFI":
            layer[3] = [1024 // divisor, 4]
        if layer[2] == "RTDETRDecoder":
            layer[3] = ["nc", 64, 300, 4, 4, 2, 256]
    return cfg


def build(family: str, work: Path):
    """The family's network from ultralytics' own yaml at its smallest scale, made narrower where its
    blocks allow (FAMILIES), with four classes."""
    rel, scale, divisor, max_channels = FAMILIES[family]
    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / rel).read_text())
    cfg["nc"] = len(NAMES)
    stem = Path(rel).stem
    if family == "rtdetr":
        cfg = rtdetr_yaml(cfg, divisor)
    elif scale:  # yolov8.yaml is built as yolov8n.yaml: ultralytics reads the scale from the name
        depth, width, _ = cfg["scales"][scale]
        cfg["scales"] = {scale: [depth, width / divisor, max_channels]}
        stem = stem if stem.endswith(scale) else stem + scale
    path = work / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    torch.manual_seed(0)
    model = RTDETR(str(path)) if family == "rtdetr" else YOLO(str(path), task="detect")
    model.model.names = dict(NAMES)
    return model


def last_convs(head, branches):
    """The last convolution of each of the head's `branches` (`cv3`: classes, `cv2`: boxes; with their
    one-to-one twins where the head has them)."""
    for name in branches:
        for branch in getattr(head, name, None) or []:
            convs = [m for m in branch.modules() if isinstance(m, torch.nn.Conv2d)]
            yield convs[-1]


def fixtures() -> torch.Tensor:
    """IMAGES letterboxed to IMGSZ, and their mirror images: [6, 3, IMGSZ, IMGSZ]."""
    import cv2
    import numpy as np
    from ultralytics.data.augment import LetterBox

    out = []
    for img in IMAGES:
        rgb = cv2.cvtColor(cv2.imread(str(img)), cv2.COLOR_BGR2RGB)
        lb = LetterBox((IMGSZ, IMGSZ), auto=False)(image=rgb)
        out += [lb, lb[:, ::-1]]
    return torch.from_numpy(np.stack(out).transpose(0, 3, 1, 2).astype(np.float32) / 255)


def outputs(net, x, convs) -> list:
    """What `convs` output on `x`, without their biases."""
    got = []
    hooks = [c.register_forward_hook(lambda m, i, o: got.append(o - m.bias.view(1, -1, 1, 1))) for c in convs]
    with torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    return got


def spread(net, x, convs, std: float, centre: float) -> None:
    """Scales each of `convs` so that its channels vary over the picture with the standard deviation
    `std`, and sets its biases so that each channel's mean is `centre`."""
    for conv, o in zip(convs, outputs(net, x, convs)):
        k = std / max(float(o.std(dim=(0, 2, 3)).mean()), 1e-6)
        conv.weight.data *= k
        conv.bias.data = centre - k * o.mean(dim=(0, 2, 3))


def calibrate(model: YOLO) -> float:
    """Makes random weights give a picture of a trained model's output: first the batch norms' statistics
    from the fixtures (ultralytics' initial running statistics let the signal fade layer by layer, so
    every anchor would see the same features), then spread class logits and box distributions (else
    every score sits at the bias and every box of a stride has one size), and last a class bias under
    which at least 3 % of the anchors score above CONF on every fixture (more on some: up to max_det
    boxes). Returns that bias."""
    net = model.model
    head = net.model[-1]
    x = fixtures()
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # a plain average over the batches seen
    net.train()
    with torch.no_grad():
        net(x)
    net.eval()
    if type(head).__name__ == "RTDETRDecoder":
        return calibrate_rtdetr(net, head, x)
    end2end = getattr(head, "end2end", False)
    if end2end:
        head.end2end = False  # the one-to-many branch is what runs; the one-to-one gets the same
    cls = list(last_convs(head, ("cv3",)))
    box = list(last_convs(head, ("cv2",)))
    spread(net, x, cls, 1.0, 0.0)
    # Box distances: DFL heads (reg_max 16) read a distribution, any centre will do; YOLO26's
    # (reg_max 1) read the distance itself, in strides: centred at 2.5, so that boxes have a size.
    spread(net, x, box, 1.0, 2.5 if getattr(head, "reg_max", 16) == 1 else 0.0)
    for mine, twin in ((cls, "one2one_cv3"), (box, "one2one_cv2")):
        for conv, other in zip(mine, last_convs(head, (twin,))):
            other.weight.data, other.bias.data = conv.weight.data.clone(), conv.bias.data.clone()
    centred = [c.bias.data.clone() for c in last_convs(head, ("cv3", "one2one_cv3"))]

    def passing(bias: float) -> float:
        for conv, c in zip(last_convs(head, ("cv3", "one2one_cv3")), centred):
            conv.bias.data = c + bias
        with torch.no_grad():
            y = net(x[::2])  # the fixtures, not their mirror images
        y = y[0] if isinstance(y, (tuple, list)) else y
        return float((y[:, 4:].amax(1) > CONF).float().mean(1).min())

    lo, hi = -20.0, 20.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if passing(mid) < 0.03 else (lo, mid)
    passing(hi)
    if end2end:
        head.end2end = True
    return hi


def calibrate_rtdetr(net, head, x) -> float:
    """RT-DETR's version of calibrate(): the last decoder layer's class scores (`dec_score_head`)
    spread and biased like a YOLO head's class branch. The batch norms are done already."""
    score = head.dec_score_head[-1]
    outs = []
    hook = score.register_forward_hook(lambda m, i, o: outs.append(o - m.bias))
    with torch.no_grad():
        net(x)
    hook.remove()
    o = outs[-1]
    k = 1.0 / max(float(o.std(dim=(0, 1)).mean()), 1e-6)
    score.weight.data *= k
    centred = -k * o.mean(dim=(0, 1))

    def passing(bias: float) -> float:
        score.bias.data = centred + bias
        with torch.no_grad():
            y = net(x[::2])
        y = y[0] if isinstance(y, (tuple, list)) else y
        return float((y[..., 4] > CONF).float().mean(1).min())

    lo, hi = -20.0, 20.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if passing(mid) < 0.03 else (lo, mid)
    passing(hi)
    return hi


def predict(path: Path, image: Path):
    # `rect=False`: on a dynamic export, predict's default letterboxes each image to the smallest
    # multiple of the stride that holds it (160 x 128 for a landscape image), a different input for
    # every shape of image; jetdetect runs the fixed [model] input size, as a fixed export does and
    # as predict does with rect=False. On a fixed export rect changes nothing.
    model = RTDETR(str(path)) if path.name.startswith("rtdetr") else YOLO(str(path), task="detect")
    r = model.predict(str(image), imgsz=IMGSZ, conf=CONF, iou=IOU, max_det=MAX_DET, rect=False, device="cpu",
                      verbose=False)[0]
    b = r.boxes
    return [{"class_id": int(c), "score": float(s), "x1": float(x[0]), "y1": float(x[1]), "x2": float(x[2]),
             "y2": float(x[3])} for x, s, c in zip(b.xyxy.numpy(), b.conf.numpy(), b.cls.numpy())]


def main() -> int:
    import cv2
    import onnx

    if not IMAGES[1].exists():
        IMAGES[1].parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(IMAGES[1]), cv2.rotate(cv2.imread(str(IMAGES[0])), cv2.ROTATE_90_CLOCKWISE))

    OUT.mkdir(parents=True, exist_ok=True)
    result = {"ultralytics": __version__, "imgsz": IMGSZ, "conf": CONF, "iou": IOU, "max_det": MAX_DET,
              "names": [NAMES[i] for i in sorted(NAMES)], "exports": {}}
    models = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family, form, args in EXPORTS:
            work = Path(tmp) / f"{family}-{form}"
            work.mkdir(exist_ok=True)
            if family not in models:
                models[family] = build(family, work)
                bias = calibrate(models[family])
                print(f"{family}: class bias {bias:.3f}")
            model = models[family]
            exported = Path(model.export(format="onnx", imgsz=IMGSZ, simplify=True, device="cpu",
                                         **args))
            name = f"{family}-{form}.onnx"
            shutil.copy(exported, OUT / name)
            exported.unlink()
            m = onnx.load(str(OUT / name))
            shape = [d.dim_value or d.dim_param for d in m.graph.output[0].type.tensor_type.shape.dim]
            meta = {p.key: p.value for p in m.metadata_props}
            per_image = {str(img.relative_to(FIXTURES)): predict(OUT / name, img) for img in IMAGES}
            counts = [len(v) for v in per_image.values()]
            print(f"{name}: output {shape}, end2end {meta.get('end2end')}, detections per image {counts}")
            result["exports"][name] = {"family": family, "form": form, "args": args, "output": shape,
                                       "end2end": meta.get("end2end"), "images": per_image}
    (OUT / "references.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
