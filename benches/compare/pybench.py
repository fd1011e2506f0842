#!/usr/bin/env python3
"""End-to-end per-frame latency of the Python ways to run the same model on the same frames.

Used by benches/compare/compare.sh; prints one JSON object.

  ort          onnxruntime + NumPy: OpenCV colour conversion and letterbox (as ultralytics
               does), NumPy normalisation, decode and class-aware NMS.
  ultralytics  ultralytics' YOLO(model).predict(frame) on the same ONNX file.

Both start from the camera's YUYV frame (converted with cv2.cvtColor inside the timed
region, as jetdetect converts it inside its own) and end with the final boxes.
"""
import argparse
import json
import sys
import time

import numpy as np


def frames_from(path, width, height, count):
    size = width * height * 2
    raw = np.fromfile(path, dtype=np.uint8)
    n = min(count, raw.size // size)
    if n == 0:
        sys.exit(f"pybench: {path}: no {width}x{height} YUYV frame in it")
    return [raw[i * size:(i + 1) * size].reshape(height, width, 2) for i in range(n)]


def percentiles(ms):
    a = np.sort(np.asarray(ms))
    q = lambda p: float(a[min(len(a) - 1, int(np.ceil(p * len(a))) - 1)])
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": float(a[-1]), "mean": float(a.mean())}


def nms(boxes, scores, iou):
    order = scores.argsort()[::-1]
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        ovr = inter / (areas[i] + areas[rest] - inter + 1e-9)
        order = rest[ovr <= iou]
    return keep


def ort_detector(model, conf, iou, threads):
    import cv2
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    h, w = inp.shape[2], inp.shape[3]

    def detect(yuyv):
        rgb = cv2.cvtColor(yuyv, cv2.COLOR_YUV2RGB_YUY2)
        sh, sw = rgb.shape[:2]
        r = min(h / sh, w / sw)
        nw, nh = round(sw * r), round(sh * r)
        if (nw, nh) != (sw, sh):
            rgb = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_LINEAR)
        dw, dh = (w - nw) / 2, (h - nh) / 2
        top, bottom = round(dh - 0.1), round(dh + 0.1)
        left, right = round(dw - 0.1), round(dw + 0.1)
        img = cv2.copyMakeBorder(rgb, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
        x = np.ascontiguousarray(img.transpose(2, 0, 1)[None], dtype=np.float32) / 255.0
        out = sess.run(None, {inp.name: x})[0][0]
        if out.shape[0] < out.shape[1]:  # YOLOv8/11 [4 + C, N]
            p = out.T
            scores = p[:, 4:]
        else:  # YOLOv5 [N, 5 + C]
            p = out
            scores = p[:, 5:] * p[:, 4:5]
        cls = scores.argmax(1)
        best = scores[np.arange(len(cls)), cls]
        m = best > conf
        p, best, cls = p[m], best[m], cls[m]
        b = np.empty((len(p), 4), np.float32)
        b[:, 0] = p[:, 0] - p[:, 2] / 2
        b[:, 1] = p[:, 1] - p[:, 3] / 2
        b[:, 2] = p[:, 0] + p[:, 2] / 2
        b[:, 3] = p[:, 1] + p[:, 3] / 2
        keep = nms(b + (cls * 4096.0)[:, None], best, iou)[:100]
        b = b[keep]
        b[:, [0, 2]] = ((b[:, [0, 2]] - left) / r).clip(0, sw)
        b[:, [1, 3]] = ((b[:, [1, 3]] - top) / r).clip(0, sh)
        return len(keep)

    return detect, f"onnxruntime {ort.__version__} (CPU) + NumPy {np.__version__}"


def ultralytics_detector(model, conf, iou, imgsz):
    import cv2
    import ultralytics
    from ultralytics import YOLO

    m = YOLO(model, task="detect")

    def detect(yuyv):
        bgr = cv2.cvtColor(yuyv, cv2.COLOR_YUV2BGR_YUY2)
        res = m.predict(bgr, imgsz=imgsz, conf=conf, iou=iou, device="cpu", verbose=False)
        return len(res[0].boxes)

    return detect, f"ultralytics {ultralytics.__version__} predict"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=["ort", "ultralytics"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--frames-file", required=True)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--imgsz", type=int, default=256)
    ap.add_argument("--conf", type=float, default=0.25)
    ap.add_argument("--iou", type=float, default=0.45)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    # Libraries print banners and warnings on stdout; the JSON result alone goes there.
    out, sys.stdout = sys.stdout, sys.stderr
    frames = frames_from(a.frames_file, a.width, a.height, a.count)
    if a.which == "ort":
        detect, what = ort_detector(a.model, a.conf, a.iou, a.threads)
    else:
        detect, what = ultralytics_detector(a.model, a.conf, a.iou, a.imgsz)
    for i in range(a.warmup):
        detect(frames[i % len(frames)])
    ms, dets = [], 0
    for f in frames:
        t = time.perf_counter()
        dets += detect(f)
        ms.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"which": a.which, "what": what, "frames": len(frames),
                      "detections_per_frame": dets / len(frames), "ms": percentiles(ms)}), file=out)


if __name__ == "__main__":
    main()
