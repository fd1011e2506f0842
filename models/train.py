#!/usr/bin/env python3
"""Train and export jetdetect's obstacle detector (YOLOv8 at "pico" scale, 3 classes) offline.

Reproduce (about an hour on 2 CPU cores; nothing is downloaded):

    python3 -m venv .venv-models && .venv-models/bin/pip install -r models/requirements.txt
    cargo run -- dataset --out /tmp/obstacles --train 2400 --val 300 --seed 2026 --crowded 0.2
    .venv-models/bin/python models/train.py --data /tmp/obstacles/data.yaml

Writes models/obstacles-v8.onnx (YOLOv8 layout, input [1, 3, 256, 256], output
[1, 7, 1344]). models/make_v5_layout.py derives the YOLOv5-layout model from it.
"""
import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# No network: no hub, no telemetry, a private settings dir.
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-cfg-"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="data.yaml written by `jetdetect dataset`")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--imgsz", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", default=str(HERE / "obstacles-yolov8p.yaml"), help="architecture yaml (built from scratch)")
    ap.add_argument("--project", default=str(Path(tempfile.gettempdir()) / "jetdetect-train"))
    ap.add_argument("--out", default=str(HERE / "obstacles-v8.onnx"))
    args = ap.parse_args()

    from ultralytics import YOLO, settings

    settings.update({"sync": False})
    model = YOLO(args.model)
    model.train(
        data=args.data,
        epochs=args.epochs,
        imgsz=args.imgsz,
        batch=args.batch,
        device="cpu",
        workers=2,
        cache="ram",
        plots=False,
        pretrained=False,
        amp=False,
        seed=0,
        deterministic=True,
        close_mosaic=max(1, args.epochs // 6),
        project=args.project,
        name="obstacles",
        exist_ok=True,
        verbose=True,
    )
    metrics = model.val(data=args.data, imgsz=args.imgsz, device="cpu", plots=False)
    print(f"val mAP50={metrics.box.map50:.4f} mAP50-95={metrics.box.map:.4f}")
    onnx = model.export(format="onnx", imgsz=args.imgsz, opset=17, simplify=True, dynamic=False)
    shutil.copy(onnx, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
