#!/usr/bin/python3
"""A real RTSP camera on 127.0.0.1 for jetdetect's rtsp:// tests: GStreamer's gst-rtsp-server
(Debian's gir1.2-gst-rtsp-server-1.0, through python3-gi) streaming H.264 from videotestsrc.

    /usr/bin/python3 tests/rtsp/server.py --port 8554 --path /cam [--user U --password P]

Prints "ready rtsp://127.0.0.1:PORT/PATH" once it listens; runs until killed.
"""
import argparse
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8554)
    ap.add_argument("--path", default="/cam")
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--user")
    ap.add_argument("--password")
    args = ap.parse_args()

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    # One encoder shared by every client; key frames every second so a client that joins (or
    # comes back) decodes within a second.
    factory.set_launch(
        f"( videotestsrc is-live=true pattern=ball ! video/x-raw,width={args.width},height={args.height},"
        f"framerate={args.fps}/1 ! videoconvert ! openh264enc gop-size={args.fps} ! h264parse ! "
        "rtph264pay name=pay0 pt=96 config-interval=1 )"
    )
    factory.set_shared(True)
    if args.user:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(args.user, args.password or ""), token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_ACCESS, True)
        permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, True)
        factory.set_permissions(permissions)
    server.get_mount_points().add_factory(args.path, factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{args.port}", file=sys.stderr)
        return 1
    print(f"ready rtsp://127.0.0.1:{args.port}{args.path}", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
