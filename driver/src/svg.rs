//! The SVG drawing the plan chart (`plan --svg`) and the run timeline (`--timeline`)
//! share: a document with a title, text, boxes with tooltips, lines, and axes with "nice"
//! ticks and units, so that every figure can be read without hovering.

use std::fmt::Write;

/// Text made safe for SVG (XML) content and attribute values.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

/// Tick values from 0 covering `max` in about `n` steps of 1, 2 or 5 × 10^k.
pub(crate) fn ticks(max: f64, n: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|k| k as f64 * step).collect()
}

/// A tick label: no more decimals than the step needs.
pub(crate) fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// The unit of an axis of bytes and of the values drawn on it, chosen by the largest value
/// so that the two agree: (bytes per unit, its name).
pub(crate) fn byte_unit(max: u64) -> (f64, &'static str) {
    match max {
        0..1_000 => (1.0, "B"),
        1_000..1_000_000 => (1e3, "kB"),
        1_000_000..1_000_000_000 => (1e6, "MB"),
        _ => (1e9, "GB"),
    }
}

/// `b` bytes in a unit of [`byte_unit`], with three significant figures or so.
pub(crate) fn in_unit(b: u64, (per, name): (f64, &str)) -> String {
    let v = b as f64 / per;
    let decimals = if per == 1.0 || v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {name}")
}

/// The colour of slot `k` (ten, then again), so that a slot's lines read as one.
pub(crate) fn slot_colour(k: usize) -> &'static str {
    const TEN: [&str; 10] = [
        "#4c78a8", "#e45756", "#54a24b", "#b279a2", "#f58518", "#72b7b2", "#9d755d", "#eeca3b",
        "#ff9da6", "#79706e",
    ];
    TEN[k % TEN.len()]
}

/// The boxes of the labels drawn so far, so that no label is drawn over another (or over
/// a title): a label that would overlap one is left out or moved.
#[derive(Default)]
pub(crate) struct Placed(Vec<[f64; 4]>);

impl Placed {
    /// The box (x0, y0, x1, y1) of text of `size` px at (x, y) with its `anchor`
    /// (`start`, `middle` or `end`): sans-serif digits are 0.64 em wide (DejaVu Sans), and
    /// a label keeps 2 px clear on each side.
    pub(crate) fn text_box(x: f64, y: f64, s: &str, size: f64, anchor: &str) -> [f64; 4] {
        let w = 0.64 * size * s.chars().count() as f64 + 4.0;
        let x0 = match anchor {
            "middle" => x - w / 2.0,
            "end" => x - w,
            _ => x,
        };
        [x0 - 2.0, y - size, x0 + w - 2.0, y + 0.3 * size]
    }

    /// Takes `b` if it overlaps no box taken: whether it did.
    pub(crate) fn take(&mut self, b: [f64; 4]) -> bool {
        let clear = self
            .0
            .iter()
            .all(|o| b[2] <= o[0] || o[2] <= b[0] || b[3] <= o[1] || o[3] <= b[1]);
        if clear {
            self.0.push(b);
        }
        clear
    }
}

/// One SVG document being drawn.
pub(crate) struct Svg {
    out: String,
}

impl Svg {
    /// A white `w` × `h` page with `title` at its top left.
    pub(crate) fn new(w: f64, h: f64, title: &str) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' viewBox='0 0 {w} {h}' font-family='sans-serif' font-size='12'>\n\
             <rect width='100%' height='100%' fill='white'/>\n\
             <text x='20' y='28' font-size='16' font-weight='bold'>{}</text>",
            escape(title)
        );
        Svg { out }
    }

    /// Raw markup (already escaped), e.g. a group's opening tag.
    pub(crate) fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Text at (x, y); `attrs` are extra attributes (`text-anchor='end'`, a fill...).
    pub(crate) fn text(&mut self, x: f64, y: f64, s: &str, attrs: &str) {
        let _ = writeln!(
            self.out,
            "<text x='{x:.1}' y='{y:.1}' {attrs}>{}</text>",
            escape(s)
        );
    }

    /// A box with a tooltip; `attrs` are extra attributes (class, stroke, data-*).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rect(
        &mut self,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: &str,
        attrs: &str,
        tip: &str,
    ) {
        let _ = write!(
            self.out,
            "<rect x='{x:.2}' y='{y:.2}' width='{:.2}' height='{:.2}' fill='{fill}' {attrs}>",
            w.max(0.0),
            h.max(0.0)
        );
        if !tip.is_empty() {
            let _ = write!(self.out, "<title>{}</title>", escape(tip));
        }
        self.out.push_str("</rect>\n");
    }

    /// Text of `size` px at (x, y) with its `anchor`, if it overlaps no label `placed`
    /// holds: whether it was drawn.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn label(
        &mut self,
        placed: &mut Placed,
        x: f64,
        y: f64,
        s: &str,
        size: f64,
        anchor: &str,
        attrs: &str,
    ) -> bool {
        let drawn = placed.take(Placed::text_box(x, y, s, size, anchor));
        if drawn {
            self.text(
                x,
                y,
                s,
                &format!("text-anchor='{anchor}' font-size='{size}' {attrs}"),
            );
        }
        drawn
    }

    pub(crate) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, attrs: &str) {
        let _ = writeln!(
            self.out,
            "<line x1='{x1:.2}' y1='{y1:.2}' x2='{x2:.2}' y2='{y2:.2}' {attrs}/>"
        );
    }

    /// A legend: coloured squares with their labels in one row from (x, y).
    pub(crate) fn legend(&mut self, x: f64, y: f64, items: &[(&str, &str)]) {
        let mut at = x;
        for (label, fill) in items {
            self.rect(
                at,
                y - 10.0,
                10.0,
                10.0,
                fill,
                "stroke='#555' stroke-width='0.5'",
                "",
            );
            self.text(at + 14.0, y, label, "");
            at += 24.0 + 7.0 * label.len() as f64;
        }
    }

    /// A horizontal axis under a plot: `x0`..`x0 + w` maps 0..`max`, at height `y`, with
    /// tick labels (`unit` after each) and `label` under them. Returns the scale (px/unit).
    pub(crate) fn x_axis(
        &mut self,
        x0: f64,
        y: f64,
        w: f64,
        max: f64,
        unit: &str,
        label: &str,
    ) -> f64 {
        let t = ticks(max, 8);
        let top = *t.last().unwrap_or(&1.0);
        let scale = w / top;
        let step = t.get(1).copied().unwrap_or(top);
        self.raw("<g class='axis x-axis'>");
        self.line(x0, y, x0 + w, y, "stroke='black'");
        for v in &t {
            let x = x0 + v * scale;
            self.line(x, y, x, y + 4.0, "stroke='black'");
            self.text(
                x,
                y + 16.0,
                &format!("{}{unit}", tick_label(*v, step)),
                "text-anchor='middle'",
            );
        }
        self.text(x0 + w / 2.0, y + 32.0, label, "text-anchor='middle'");
        self.raw("</g>");
        scale
    }

    /// A vertical axis left of a plot: `y_bottom` up to `y_bottom - h` maps 0..`max`, with
    /// tick labels (`unit` after each), faint grid lines `grid_w` wide, and `label` above.
    /// Returns the scale (px/unit).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn y_axis(
        &mut self,
        x: f64,
        y_bottom: f64,
        h: f64,
        max: f64,
        unit: &str,
        label: &str,
        grid_w: f64,
    ) -> f64 {
        let t = ticks(max, 4);
        let top = *t.last().unwrap_or(&1.0);
        let scale = h / top;
        let step = t.get(1).copied().unwrap_or(top);
        self.raw("<g class='axis y-axis'>");
        self.line(x, y_bottom, x, y_bottom - h, "stroke='black'");
        for v in &t {
            let y = y_bottom - v * scale;
            self.line(x - 4.0, y, x, y, "stroke='black'");
            if grid_w > 0.0 {
                self.line(x, y, x + grid_w, y, "stroke='#ddd'");
            }
            self.text(
                x - 6.0,
                y + 4.0,
                &format!("{}{unit}", tick_label(*v, step)),
                "text-anchor='end'",
            );
        }
        self.text(x, y_bottom - h - 8.0, label, "text-anchor='start'");
        self.raw("</g>");
        scale
    }

    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.7, 4), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8]);
        assert_eq!(ticks(0.0, 4), vec![0.0, 0.5, 1.0]);
        let t = ticks(512.0, 4);
        assert!(*t.last().unwrap() >= 512.0 && t.len() <= 6, "{t:?}");
        assert_eq!(tick_label(0.6000000000000001, 0.2), "0.6");
        assert_eq!(tick_label(200.0, 100.0), "200");
        assert_eq!(escape("a<b & 'c'"), "a&lt;b &amp; &apos;c&apos;");
    }

    #[test]
    fn bytes_take_one_unit_per_axis() {
        let u = byte_unit(25_100);
        assert_eq!(u.1, "kB");
        assert_eq!([in_unit(88, u), in_unit(25_100, u)], ["0.09 kB", "25.1 kB"]);
        assert_eq!(in_unit(20_400_000, byte_unit(20_400_000)), "20.4 MB");
        assert_eq!(in_unit(512, byte_unit(512)), "512 B");
    }

    #[test]
    fn labels_do_not_overlap() {
        let mut p = Placed::default();
        assert!(p.take(Placed::text_box(100.0, 50.0, "27", 10.0, "middle")));
        assert!(!p.take(Placed::text_box(104.0, 52.0, "28", 10.0, "middle")));
        assert!(p.take(Placed::text_box(130.0, 50.0, "33", 10.0, "middle")));
        assert!(p.take(Placed::text_box(100.0, 70.0, "35", 10.0, "middle")));
    }
}
