// jetdetect's live view: the newest picture of a camera (its boxes drawn by the daemon on the
// frame they were found in), the last stats interval, and an end-to-end latency histogram.
// Self-contained: no external scripts, fonts or styles. Every request is a GET.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { camera: "", after: 0, paused: false, last: null, pictures: 0, errors: [] };
// For tests and for the curious: `jetdetect` in the console holds the shown picture's data.
window.jetdetect = state;

function problem(text) {
  $("problem").textContent = text || "";
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function load(img, url) {
  return new Promise((resolve, reject) => {
    img.onload = () => resolve();
    img.onerror = () => reject(new Error("cannot load " + url));
    img.src = url;
  });
}

function fmt(v, digits) {
  return typeof v === "number" ? v.toFixed(digits) : "–";
}

function showPicture(meta) {
  const d = meta.detections || {};
  $("caption").textContent =
    `${meta.camera} frame ${d.seq} · ${d.width}×${d.height} · ${(d.detections || []).length} detections · ` +
    `age ${fmt(meta.age_ms, 1)} ms when drawn`;
  $("age").textContent = `${fmt(meta.age_ms, 1)} ms (when drawn)`;
  const tracks = new Map();
  for (const o of (meta.hazards && meta.hazards.obstacles) || []) tracks.set(o.track_id, o);
  const body = $("detections").tBodies[0];
  body.replaceChildren();
  (d.detections || []).forEach((det, i) => {
    const tr = document.createElement("tr");
    const o = det.track_id ? tracks.get(det.track_id) : undefined;
    const cells = [
      det.class,
      fmt(det.score, 2),
      det.track_id ? "#" + det.track_id : "",
      o && o.ttc_s != null ? fmt(o.ttc_s, 1) + " s" : "",
      [det.x1, det.y1, det.x2, det.y2].map((v) => Math.round(v)).join(" "),
    ];
    cells.forEach((text, k) => {
      const td = document.createElement("td");
      if (k === 0) {
        const sw = document.createElement("span");
        sw.className = "swatch";
        sw.style.background = meta.colours[i];
        td.append(sw);
      }
      td.append(text);
      tr.append(td);
    });
    body.append(tr);
  });
}

async function pictures() {
  const img = $("picture");
  for (;;) {
    if (state.paused) {
      await sleep(200);
      continue;
    }
    try {
      const q = `camera=${encodeURIComponent(state.camera)}&after=${state.after}`;
      const r = await fetch(`picture.json?${q}`, { cache: "no-store" });
      if (r.status === 204) {
        problem(`no new picture from ${state.camera} in 2.5 s: is the camera blind?`);
        continue;
      }
      if (!r.ok) {
        problem(`picture.json: ${r.status} ${await r.text()}`);
        await sleep(1000);
        continue;
      }
      const meta = await r.json();
      if (state.paused) continue;
      await load(img, meta.image);
      state.after = meta.id;
      state.last = meta;
      state.pictures += 1;
      showPicture(meta);
      problem("");
    } catch (e) {
      problem(String(e.message || e));
      await sleep(1000);
    }
  }
}

function histogram(h, p99) {
  const svg = $("histogram");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const counts = h.counts || [];
  const max = Math.max(1, ...counts);
  const w = 240 / Math.max(1, counts.length);
  counts.forEach((c, i) => {
    const bar = document.createElementNS(ns, "rect");
    const height = (c / max) * 90;
    bar.setAttribute("x", String(i * w + 0.5));
    bar.setAttribute("y", String(95 - height));
    bar.setAttribute("width", String(Math.max(1, w - 1)));
    bar.setAttribute("height", String(height));
    svg.append(bar);
  });
  if (h.bin_ms > 0 && p99 > 0) {
    const x = Math.min(240, (p99 / h.bin_ms) * w);
    const line = document.createElementNS(ns, "line");
    line.setAttribute("x1", String(x));
    line.setAttribute("x2", String(x));
    line.setAttribute("y1", "0");
    line.setAttribute("y2", "95");
    svg.append(line);
  }
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "2");
  label.setAttribute("y", "106");
  label.textContent = h.bin_ms > 0 ? `0 … ${fmt(h.bin_ms * counts.length, 0)} ms, ${fmt(h.bin_ms, 1)} ms per bar; line: p99` : "no frames yet";
  svg.append(label);
}

function showStatus(s) {
  const cams = (s.view && s.view.cameras) || [];
  const select = $("camera");
  if (select.options.length !== cams.length) {
    select.replaceChildren(...cams.map((c) => new Option(c, c)));
    select.value = state.camera || cams[0] || "";
    state.camera = select.value;
  }
  const st = s.stats;
  if (!st) {
    $("fps").textContent = `waiting for the first stats interval (every ${s.stats_interval_s || "?"} s)`;
    return;
  }
  const e2e = st.latency_ms && st.latency_ms.end_to_end;
  $("fps").textContent = `${fmt(st.fps.processed, 1)} (camera ${fmt(st.fps.capture, 1)}) over ${fmt(st.interval_s, 0)} s`;
  $("e2e").textContent = e2e ? `${fmt(e2e.p50, 1)} / ${fmt(e2e.p99, 1)} ms` : "–";
  const blind = $("blind");
  blind.textContent = st.blind ? `BLIND: ${st.blind.camera}: ${st.blind.detail}` : "no";
  blind.className = st.blind ? "bad" : "";
  $("drops").textContent = `${st.frames.dropped} / ${st.frames.errors}`;
  const t = st.telemetry || {};
  const clocks = [];
  if (t.gpu_mhz) clocks.push(`GPU ${fmt(t.gpu_mhz[0], 0)} MHz`);
  if (t.emc_mhz != null) clocks.push(`EMC ${fmt(t.emc_mhz, 0)} MHz`);
  if (t.cpu_mhz && t.cpu_mhz.length) clocks.push(`CPU ${fmt(t.cpu_mhz[0], 0)} MHz`);
  clocks.push(t.pinned ? "pinned" : "not pinned");
  if (t.throttling) clocks.push("THROTTLING");
  $("clocks").textContent = clocks.join(" · ");
  const temps = Object.entries(t.temp_c || {}).map(([z, c]) => `${z} ${fmt(c, 1)} °C`);
  $("temps").textContent = temps.length ? temps.join(" · ") : "none readable";
  const power = Object.entries(t.power_mw || {}).map(([r, mw]) => `${r} ${fmt(mw / 1000, 2)} W`);
  $("power").textContent = power.length ? power.join(" · ") : "none readable";
  $("histo-note").textContent = `(last ${fmt(st.interval_s, 0)} s)`;
  histogram(s.histogram || {}, e2e ? e2e.p99 : 0);
}

async function status() {
  for (;;) {
    try {
      const r = await fetch("status.json", { cache: "no-store" });
      if (r.ok) showStatus(await r.json());
      else problem(`status.json: ${r.status}`);
    } catch (e) {
      problem(`the daemon does not answer: ${e.message || e}`);
    }
    await sleep(1000);
  }
}

function setup() {
  $("camera").addEventListener("change", (e) => {
    state.camera = e.target.value;
    state.after = 0;
    $("snapshot").href = `snapshot.jpg?camera=${encodeURIComponent(state.camera)}`;
    $("snapshot-raw").href = `snapshot.jpg?camera=${encodeURIComponent(state.camera)}&raw=1`;
  });
  $("pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("pause").textContent = state.paused ? "resume" : "pause";
  });
  status();
  pictures();
}

setup();
