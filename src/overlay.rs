//! The overlay: a frame's detections, track numbers, times to contact and zones drawn on its
//! RGB picture, for people to look at (the live view, `GET /snapshot.jpg`, `detect --draw`).
//!
//! Drawing uses embedded-graphics' primitives and its built-in bitmap fonts, so nothing is
//! loaded from disk. Each class has its own colour ([`colour`]), saturated hues that the
//! synthetic scene and most real scenes do not have; boxes are drawn with their stroke centred
//! on the box's edges. Zones (with `[hazards] enabled`) are a band along the bottom, one cell per
//! sector, coloured by level. A caption at the top left names the camera, the frame and its
//! capture time (UTC).

use embedded_graphics::mono_font::ascii::{FONT_10X20, FONT_6X10};
use embedded_graphics::mono_font::{MonoFont, MonoTextStyleBuilder};
use embedded_graphics::pixelcolor::Rgb888;
use embedded_graphics::prelude::*;
use embedded_graphics::primitives::{PrimitiveStyleBuilder, Rectangle, StrokeAlignment};
use embedded_graphics::text::{Baseline, Text};

use crate::hazard::zones::Level;
use crate::report::FrameReport;
use crate::yolo::{ClassNames, Detection};

/// Class colours, by class id modulo their number.
pub const PALETTE: [[u8; 3]; 8] = [
    [255, 0, 255], // magenta
    [255, 235, 0], // yellow
    [0, 255, 255], // cyan
    [0, 255, 64],  // green
    [255, 128, 0], // orange
    [160, 80, 255],
    [255, 255, 255],
    [0, 128, 255],
];

/// The colour class `class_id`'s boxes are drawn in.
pub fn colour(class_id: usize) -> [u8; 3] {
    PALETTE[class_id % PALETTE.len()]
}

/// A zone's colour for its level.
pub fn level_colour(level: Level) -> [u8; 3] {
    match level {
        Level::Clear => [40, 200, 80],
        Level::Caution => [255, 170, 0],
        Level::Danger => [255, 30, 30],
    }
}

/// A packed RGB24 image to draw on.
pub struct Canvas<'a> {
    rgb: &'a mut [u8],
    width: u32,
    height: u32,
}

impl<'a> Canvas<'a> {
    /// `rgb` holds `width` x `height` pixels, `R G B` each.
    pub fn new(rgb: &'a mut [u8], width: u32, height: u32) -> Canvas<'a> {
        debug_assert_eq!(rgb.len(), width as usize * height as usize * 3);
        Canvas { rgb, width, height }
    }

    fn put(&mut self, x: i32, y: i32, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as u32) < self.width && (y as u32) < self.height {
            let i = (y as usize * self.width as usize + x as usize) * 3;
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    /// Mixes `c` into the rectangle `[x1, x2) x [y1, y2)` at `alpha` (0..=1).
    fn blend(&mut self, x1: i32, y1: i32, x2: i32, y2: i32, c: [u8; 3], alpha: f32) {
        let (w, h) = (self.width as i32, self.height as i32);
        for y in y1.max(0)..y2.min(h) {
            for x in x1.max(0)..x2.min(w) {
                let i = (y as usize * w as usize + x as usize) * 3;
                for (px, &ck) in self.rgb[i..i + 3].iter_mut().zip(&c) {
                    *px = (*px as f32 * (1.0 - alpha) + ck as f32 * alpha).round() as u8;
                }
            }
        }
    }
}

impl OriginDimensions for Canvas<'_> {
    fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }
}

impl DrawTarget for Canvas<'_> {
    type Color = Rgb888;
    type Error = std::convert::Infallible;

    fn draw_iter<I: IntoIterator<Item = Pixel<Rgb888>>>(&mut self, pixels: I) -> Result<(), Self::Error> {
        for Pixel(p, c) in pixels {
            self.put(p.x, p.y, [c.r(), c.g(), c.b()]);
        }
        Ok(())
    }
}

fn rgb(c: [u8; 3]) -> Rgb888 {
    Rgb888::new(c[0], c[1], c[2])
}

/// Stroke width and font for a picture `height` pixels high.
fn scale(height: u32) -> (u32, &'static MonoFont<'static>) {
    match height {
        0..=599 => (2, &FONT_6X10),
        600..=1199 => (3, &FONT_10X20),
        _ => (4, &FONT_10X20),
    }
}

/// Writes `text` with its top-left corner at `(x, y)`, dark on `bg`, kept inside the picture.
fn label(c: &mut Canvas<'_>, text: &str, x: i32, y: i32, bg: [u8; 3], font: &MonoFont<'_>) {
    let w = (text.len() as u32 * font.character_size.width) as i32;
    let h = font.character_size.height as i32;
    let x = x.clamp(0, (c.width as i32 - w).max(0));
    let y = y.clamp(0, (c.height as i32 - h).max(0));
    let style =
        MonoTextStyleBuilder::new().font(font).text_color(Rgb888::BLACK).background_color(rgb(bg)).build();
    let _ = Text::with_baseline(text, Point::new(x, y), style, Baseline::Top).draw(c);
}

/// One box with its label: class, score, and the track number and time to contact when known.
pub fn draw_box(
    c: &mut Canvas<'_>,
    d: &Detection,
    names: &ClassNames,
    track: u64,
    ttc_s: Option<f64>,
    level: Option<Level>,
) {
    let (stroke, font) = scale(c.height);
    let col = colour(d.class_id);
    let (x1, y1) = (d.x1.round() as i32, d.y1.round() as i32);
    let (x2, y2) = (d.x2.round() as i32, d.y2.round() as i32);
    let style = PrimitiveStyleBuilder::new()
        .stroke_color(rgb(col))
        .stroke_width(stroke)
        .stroke_alignment(StrokeAlignment::Center)
        .build();
    let size = Size::new((x2 - x1).max(1) as u32, (y2 - y1).max(1) as u32);
    let _ = Rectangle::new(Point::new(x1, y1), size).into_styled(style).draw(c);
    let mut text = format!("{} {:.2}", names.name(d.class_id), d.score);
    if track > 0 {
        text.push_str(&format!(" #{track}"));
    }
    if let Some(t) = ttc_s {
        text.push_str(&format!(" {t:.1}s"));
    }
    if level == Some(Level::Danger) {
        text.push_str(" DANGER");
    }
    let h = font.character_size.height as i32;
    // Above the box where there is room, else inside its top edge.
    let y = if y1 - stroke as i32 - h >= 0 { y1 - stroke as i32 / 2 - h } else { y1 + stroke as i32 };
    label(c, &text, x1 - stroke as i32 / 2, y, col, font);
}

/// Where azimuth `deg` falls on a picture `width` wide whose edges are at `span` (pinhole
/// model: x is linear in the tangent of the azimuth).
fn azimuth_x(deg: f64, span: (f64, f64), width: u32) -> i32 {
    let t = |d: f64| d.to_radians().tan();
    let (l, r) = (t(span.0), t(span.1));
    if (r - l).abs() < 1e-9 {
        return 0;
    }
    ((t(deg) - l) / (r - l) * width as f64).round() as i32
}

/// The whole overlay of `report` on its frame's RGB picture `rgb` (its width and height are the
/// report's).
pub fn draw(rgb: &mut [u8], report: &FrameReport, names: &ClassNames) {
    let (w, h) = (report.width, report.height);
    let mut c = Canvas::new(rgb, w, h);
    let (_, font) = scale(h);
    let hz = &report.hazards;
    // Zones first, so that boxes stay on top.
    if !hz.zones.is_empty() {
        let band = (h as i32 / 24).max(font.character_size.height as i32 + 4);
        for z in &hz.zones {
            let (x1, x2) = (azimuth_x(z.from_deg, hz.span_deg, w), azimuth_x(z.to_deg, hz.span_deg, w));
            let col = level_colour(z.level);
            c.blend(x1, h as i32 - band, x2, h as i32, col, 0.55);
            c.blend(x1, h as i32 - band, x1 + 1, h as i32, [0, 0, 0], 0.8);
            if let Some(t) = z.ttc_s {
                let text = format!("{t:.1}s");
                let tw = text.len() as i32 * font.character_size.width as i32;
                let tx = (x1 + x2) / 2 - tw / 2;
                let ty = h as i32 - band / 2 - font.character_size.height as i32 / 2;
                label(&mut c, &text, tx, ty, col, font);
            }
        }
    }
    for (i, d) in report.detections.iter().enumerate() {
        let track = hz.track_of.get(i).copied().unwrap_or(0);
        let obstacle = hz.obstacles.iter().find(|o| o.detection == i && o.id == track && track > 0);
        draw_box(&mut c, d, names, track, obstacle.and_then(|o| o.ttc.seconds), obstacle.map(|o| o.level));
    }
    let caption = format!("{} #{} {}", report.camera.name, report.seq, utc(report.captured_wall_ns));
    label(&mut c, &caption, 0, 0, [255, 255, 255], font);
}

/// Encodes a packed RGB24 picture as JPEG at `quality` (1..=100), colour at full resolution
/// (4:4:4).
pub fn jpeg(rgb: &[u8], width: u32, height: u32, quality: u8) -> Result<Vec<u8>, String> {
    let (w, h) = match (u16::try_from(width), u16::try_from(height)) {
        (Ok(w), Ok(h)) => (w, h),
        _ => return Err(format!("{width}x{height} is larger than JPEG allows (65535)")),
    };
    let mut out = Vec::with_capacity(rgb.len() / 8);
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, quality);
    // No chroma subsampling: with 4:2:0 a 2-pixel box line takes the colour of what is under it.
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_4_4);
    encoder.encode(rgb, w, h, jpeg_encoder::ColorType::Rgb).map_err(|e| e.to_string())?;
    Ok(out)
}

/// `YYYY-MM-DD HH:MM:SS.mmmZ` for `ns` since the Unix epoch.
pub fn utc(ns: u128) -> String {
    let ms = (ns / 1_000_000) as i64;
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Days to a civil date (proleptic Gregorian; H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    let s = ms_of_day / 1000;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03}Z", s / 3600, s / 60 % 60, s % 60, ms_of_day % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hazard::zones::Zone;

    fn px(rgb: &[u8], w: u32, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * w + x) * 3) as usize;
        [rgb[i], rgb[i + 1], rgb[i + 2]]
    }

    /// A `w` x `h` picture of grey level `fill` and an empty report of its size.
    fn blank(w: u32, h: u32, fill: u8) -> (Vec<u8>, FrameReport) {
        let mut r = FrameReport::new();
        r.width = w;
        r.height = h;
        (vec![fill; (w * h * 3) as usize], r)
    }

    #[test]
    fn boxes_land_on_their_edges_in_their_class_colour() {
        let (w, h) = (320u32, 240u32);
        let (mut rgb, mut r) = blank(w, h, 60);
        r.detections.push(Detection { class_id: 2, score: 0.9, x1: 100.0, y1: 80.0, x2: 200.0, y2: 180.0 });
        draw(&mut rgb, &r, &ClassNames::numbered(3));
        let cyan = colour(2);
        // Each edge's middle, on the edge itself.
        for (x, y) in [(150, 80), (150, 180), (100, 130), (200, 130)] {
            assert_eq!(px(&rgb, w, x, y), cyan, "edge at ({x}, {y})");
        }
        assert_eq!(px(&rgb, w, 150, 130), [60, 60, 60], "the inside is left alone");
        assert_eq!(px(&rgb, w, 150, 100), [60, 60, 60]);
    }

    #[test]
    fn zones_are_a_band_coloured_by_level() {
        let (w, h) = (300u32, 200u32);
        let (mut rgb, mut r) = blank(w, h, 0);
        r.hazards.span_deg = (-30.0, 30.0);
        let zone =
            |a, b, level| Zone { from_deg: a, to_deg: b, level, track: None, ttc_s: None, range_m: None };
        r.hazards.zones = vec![
            zone(-30.0, -10.0, Level::Clear),
            zone(-10.0, 10.0, Level::Danger),
            zone(10.0, 30.0, Level::Caution),
        ];
        draw(&mut rgb, &r, &ClassNames::numbered(1));
        let bottom = |x| px(&rgb, w, x, h - 2);
        assert!(bottom(150)[0] > 100 && bottom(150)[1] < 40, "centre is danger red: {:?}", bottom(150));
        assert!(bottom(20)[1] > 80 && bottom(20)[0] < 40, "left is clear green: {:?}", bottom(20));
        assert!(bottom(280)[0] > 100 && bottom(280)[1] > 60, "right is caution amber: {:?}", bottom(280));
        assert_eq!(px(&rgb, w, 150, 100), [0, 0, 0], "the band stays at the bottom");
        // Pinhole: ±10° of a ±30° view sit closer to the centre than a third of the width.
        assert_eq!(azimuth_x(0.0, (-30.0, 30.0), 300), 150);
        let x = azimuth_x(-10.0, (-30.0, 30.0), 300);
        assert_eq!(x, 104, "tan(-10°) is 0.176, tan(30°) 0.577");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000Z");
        // 2024-02-29 12:34:56.789 UTC
        assert_eq!(utc(1_709_210_096_789_000_000), "2024-02-29 12:34:56.789Z");
    }
}
