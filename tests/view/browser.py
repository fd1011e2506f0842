#!/usr/bin/env python3
"""Opens jetdetect's live view in headless Chromium and records what a test checks.

Usage: browser.py URL OUT_DIR

Chromium (Debian's `chromium`, or $CHROMIUM) is driven over the DevTools protocol through
--remote-debugging-pipe (file descriptors 3 and 4), so nothing beyond the Python standard
library is needed. The page is loaded at 1280x900, device scale 1; the script waits until it
has shown several pictures, checks that they keep coming, pauses the page (its own pause
button), and writes:

  OUT_DIR/shot.png     a screenshot of the paused page
  OUT_DIR/result.json  {"errors": [console errors, exceptions, failed loads],
                        "pictures": [picture ids seen over time],
                        "meta": the shown picture's data (detections, truth, colours),
                        "rect": the picture's place on the page, "natural": its size}
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

URL, OUT = sys.argv[1], sys.argv[2]
CHROMIUM = os.environ.get("CHROMIUM", "chromium")


class Browser:
    def __init__(self):
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="jd-chromium-")

        def fds():
            # Through fresh copies: dup2 onto the same number would keep close-on-exec.
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             "--window-size=1280,900", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe (did it start? try `chromium --version`)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def errors(events):
    out = []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + str(d.get("exception", {}).get("description", d.get("text"))))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    b = Browser()
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        b.session = b.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for m in ("Runtime.enable", "Log.enable", "Page.enable"):
            b.call(m)
        b.call("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        b.call("Page.navigate", {"url": URL})
        seen = []
        deadline = time.time() + 90
        # Several pictures, then more over the next seconds: the picture updates.
        while time.time() < deadline:
            v = b.evaluate("window.jetdetect ? [jetdetect.pictures, jetdetect.last ? jetdetect.last.id : 0] : [0, 0]")
            if v and v[1] and (not seen or seen[-1] != v[1]):
                seen.append(v[1])
            if len(seen) >= 8:
                break
            time.sleep(0.25)
        b.evaluate("document.getElementById('pause').click()")
        time.sleep(1.0)
        shown = b.evaluate(
            "(() => { const i = document.getElementById('picture'); const r = i.getBoundingClientRect();"
            " return {meta: jetdetect.last, rect: [r.x, r.y, r.width, r.height],"
            " natural: [i.naturalWidth, i.naturalHeight], fps: document.getElementById('fps').textContent,"
            " e2e: document.getElementById('e2e').textContent, bars: document.querySelectorAll('#histogram rect').length}; })()")
        # The figures and the histogram come with the first stats interval.
        deadline = time.time() + 15
        while time.time() < deadline and not shown["bars"]:
            time.sleep(0.5)
            shown.update(b.evaluate(
                "({fps: document.getElementById('fps').textContent, e2e: document.getElementById('e2e').textContent,"
                " bars: document.querySelectorAll('#histogram rect').length})"))
        shot = b.call("Page.captureScreenshot", {"format": "png"})
        with open(os.path.join(OUT, "shot.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        # Events that arrived while idle are read with the next call.
        b.evaluate("1")
        result = dict(shown, errors=errors(b.events), pictures=seen)
        with open(os.path.join(OUT, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(f"pictures seen: {seen}; errors: {result['errors']}; fps: {shown['fps']}; e2e: {shown['e2e']}")
    finally:
        b.close()


if __name__ == "__main__":
    main()
