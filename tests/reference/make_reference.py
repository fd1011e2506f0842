#!/usr/bin/env python3
"""Independent reference outputs for jetdetect's tests (committed under tests/reference/).

    .venv-models/bin/python tests/reference/make_reference.py

For every fixture image and for both shipped models (YOLOv8 and YOLOv5 layout):
  * letterbox/<image>.png   ultralytics' own LetterBox (OpenCV) of the image at the
                            model input size; for the raw YUYV/NV12 fixtures the
                            colour conversion is OpenCV's cvtColor.
  * outputs/<model>__<image>.f32
                            the raw output tensor ONNX Runtime computes from that
                            letterboxed input (little-endian f32), for decode-only tests.
  * detections.json         NumPy decoding + NMS of that output (written here, not
                            shared with the Rust code) and, for the YOLOv8 model,
                            ultralytics' own `predict` on the image; the script
                            checks the two agree before writing anything.

Nothing is downloaded; the models and fixtures are in the repository.
"""
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-cfg-"))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "reference"
FIX = ROOT / "tests" / "fixtures"
MODELS = {"v8": ROOT / "models" / "obstacles-v8.onnx", "v5": ROOT / "models" / "obstacles-v5.onnx"}
CONF, IOU, MAX_DET = 0.25, 0.45, 100
RAW = {  # raw fixtures: (file, width, height, OpenCV conversion)
    "scene_a.yuyv": (320, 240, cv2.COLOR_YUV2RGB_YUYV),
    "scene_a.nv12": (320, 240, cv2.COLOR_YUV2RGB_NV12),
}


def letterbox(rgb: np.ndarray, size: int) -> np.ndarray:
    from ultralytics.data.augment import LetterBox

    # LetterBox works on BGR like the rest of ultralytics; colour order does not matter for resizing.
    return LetterBox((size, size), auto=False, stride=32)(image=rgb)


def load_rgb(path: Path) -> np.ndarray:
    if path.name in RAW:
        w, h, code = RAW[path.name]
        data = np.fromfile(path, np.uint8)
        if code == cv2.COLOR_YUV2RGB_YUYV:
            return cv2.cvtColor(data.reshape(h, w, 2), code)
        return cv2.cvtColor(data.reshape(h * 3 // 2, w), code)
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of box a [4] against boxes b [K, 4]."""
    w = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    h = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def decode(out: np.ndarray, layout: str, src_hw, dst: int):
    """NumPy YOLO decoding: thresholds, class-aware greedy NMS, scale back and clip."""
    if layout == "v8":
        p = out[0].T  # [N, 4+C]
        scores_all = p[:, 4:]
    else:
        p = out[0]  # [N, 5+C]
        obj = p[:, 4:5]
        scores_all = np.where(obj > CONF, p[:, 5:] * obj, 0.0)
    cls = scores_all.argmax(1)
    conf = scores_all.max(1)
    keep = conf > CONF
    xywh, conf, cls = p[keep, :4], conf[keep], cls[keep]
    boxes = np.stack([xywh[:, 0] - xywh[:, 2] / 2, xywh[:, 1] - xywh[:, 3] / 2,
                      xywh[:, 0] + xywh[:, 2] / 2, xywh[:, 1] + xywh[:, 3] / 2], 1)
    order = np.argsort(-conf, kind="stable")
    boxes, conf, cls = boxes[order], conf[order], cls[order]
    alive = np.ones(len(conf), bool)
    picked = []
    for i in range(len(conf)):
        if not alive[i]:
            continue
        picked.append(i)
        if len(picked) == MAX_DET:
            break
        rest = np.arange(i + 1, len(conf))
        same = rest[(cls[rest] == cls[i]) & alive[rest]]
        alive[same[iou(boxes[i], boxes[same]) > IOU]] = False
    h, w = src_hw
    gain = min(dst / h, dst / w)
    pad_x = round((dst - w * gain) / 2 - 0.1)
    pad_y = round((dst - h * gain) / 2 - 0.1)
    dets = []
    for i in picked:
        b = boxes[i].copy()
        b[[0, 2]] = np.clip((b[[0, 2]] - pad_x) / gain, 0, w)
        b[[1, 3]] = np.clip((b[[1, 3]] - pad_y) / gain, 0, h)
        dets.append({"class_id": int(cls[i]), "score": float(conf[i]),
                     "x1": float(b[0]), "y1": float(b[1]), "x2": float(b[2]), "y2": float(b[3])})
    return dets


def ultralytics_predict(model_path: Path, image: Path, size: int):
    from ultralytics import YOLO

    r = YOLO(str(model_path), task="detect").predict(str(image), imgsz=size, conf=CONF, iou=IOU,
                                                     max_det=MAX_DET, device="cpu", verbose=False)[0]
    b = r.boxes
    return [{"class_id": int(c), "score": float(s), "x1": float(x[0]), "y1": float(x[1]),
             "x2": float(x[2]), "y2": float(x[3])}
            for x, s, c in zip(b.xyxy.numpy(), b.conf.numpy(), b.cls.numpy())]


def same(a, b, px=1.0, score=1e-3) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x["class_id"] != y["class_id"] or abs(x["score"] - y["score"]) > score:
            return False
        if any(abs(x[k] - y[k]) > px for k in ("x1", "y1", "x2", "y2")):
            return False
    return True


def main() -> int:
    images = sorted((FIX / "images").glob("*.png")) + sorted((FIX / "images").glob("*.jpg"))
    # Portrait frames: padding left and right, odd (38.5 and 37.5 columns at 256), which pins the
    # letterbox's rounding of the left pad; the other fixtures pad above and below, or not at all.
    # obstacles_213x301.png is a crop of scene_480x480.png, so the demo model finds obstacles in it.
    images += [FIX / "portrait" / "scene_211x301.png", FIX / "portrait" / "obstacles_213x301.png"]
    images += [FIX / "raw" / n for n in RAW]
    (REF / "letterbox").mkdir(parents=True, exist_ok=True)
    (REF / "outputs").mkdir(parents=True, exist_ok=True)
    result = {"conf": CONF, "iou": IOU, "max_det": MAX_DET, "models": {}}
    sessions = {k: ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for k, p in MODELS.items()}
    size = sessions["v8"].get_inputs()[0].shape[2]
    for layout, sess in sessions.items():
        per_image = {}
        for img in images:
            rgb = load_rgb(img)
            lb = letterbox(rgb, size)
            if layout == "v8":
                cv2.imwrite(str(REF / "letterbox" / f"{img.name}.png"), cv2.cvtColor(lb, cv2.COLOR_RGB2BGR))
            x = (lb.transpose(2, 0, 1)[None].astype(np.float32)) / 255.0
            out = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            out.astype("<f4").tofile(REF / "outputs" / f"{layout}__{img.name}.f32")
            dets = decode(out, layout, rgb.shape[:2], size)
            entry = {"width": rgb.shape[1], "height": rgb.shape[0], "output_shape": list(out.shape),
                     "numpy": dets}
            if layout == "v8" and img.suffix in (".png", ".jpg"):
                ul = ultralytics_predict(MODELS["v8"], img, size)
                if not same(dets, ul):
                    print(f"NumPy and ultralytics disagree on {img.name}:\n{dets}\n{ul}", file=sys.stderr)
                    return 1
                entry["ultralytics"] = ul
            per_image[img.name] = entry
            print(f"{layout} {img.name}: {len(dets)} detections")
        result["models"][layout] = {"file": MODELS[layout].name, "images": per_image}
    for name in result["models"]["v8"]["images"]:
        a = result["models"]["v8"]["images"][name]["numpy"]
        b = result["models"]["v5"]["images"][name]["numpy"]
        if not same(a, b, px=1e-3, score=1e-5):
            print(f"v5 and v8 layouts disagree on {name}", file=sys.stderr)
            return 1
    (REF / "detections.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {REF / 'detections.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
