//! A CSV file's row index: where its data rows start, learnt by one pass over its lines
//! (no field is parsed), made piece by piece and merged. The driver scans a small file
//! itself; a large one is counted by the functions (`Kernel::CsvCount`), one row of
//! [`PIECE_ROW`] numbers per piece, which [`CsvIndex::from_piece_row`] reads back: the
//! merged index is the same either way.

use nums_layout::batch::CSV_PIECE;

/// Every how many data rows a [`CsvIndex`] marks where a row starts.
pub const CSV_STRIDE: u64 = 1024;

/// Where the data rows of a CSV file of numbers are, learnt by one pass over its lines (no
/// field is parsed: the functions parse their own rows), made piece by piece and merged. A
/// data row is a line with something before its `#` comment; `\r\n` line ends are taken.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsvIndex {
    /// Bytes of the file.
    pub size: u64,
    /// Data rows (not the header, comments or blank lines).
    pub rows: u64,
    /// Fields of the first data row, or of the header (every row must have as many).
    pub columns: u64,
    /// The header line's names (a file read with `header`), else none.
    pub names: Vec<String>,
    /// The header line's line (from 1; 0 without a header).
    pub header_line: u64,
    /// Fields of the first data row (0 before one): with a header, to hold against its
    /// names before anything runs.
    pub first_fields: u64,
    /// (data row, byte offset, line from 1) of some data rows, in order: at least every
    /// `CSV_STRIDE` rows, and the first row of each piece scanned.
    pub marks: Vec<(u64, u64, u64)>,
    /// Lines of the file (with the last one, whether or not it ends in a newline).
    pub lines: u64,
}

impl CsvIndex {
    /// For data rows `r0..r1`: (first byte, end byte, line of the first byte, data rows
    /// to pass over from there).
    pub fn span(&self, r0: u64, r1: u64) -> (u64, u64, u64, u64) {
        let m = self.marks.partition_point(|x| x.0 <= r0).saturating_sub(1);
        let (row, start, line) = self.marks[m];
        let end = self.marks[self.marks.partition_point(|x| x.0 < r1)..]
            .first()
            .map_or(self.size, |x| x.1);
        (start, end, line, r0 - row)
    }

    /// The index of a file cut into pieces at line starts, from each piece's own index (its
    /// offsets, lines and rows counted from the piece's start), in file order.
    pub fn merge(pieces: Vec<(u64, CsvIndex)>, size: u64) -> CsvIndex {
        let mut out = CsvIndex {
            size,
            ..Default::default()
        };
        for (start, p) in pieces {
            if out.names.is_empty() && !p.names.is_empty() {
                out.names = p.names;
                out.columns = p.columns;
                out.header_line = out.lines + p.header_line;
            }
            if out.rows == 0 {
                out.first_fields = p.first_fields;
            }
            if out.columns == 0 {
                out.columns = p.columns;
            }
            out.marks.extend(
                p.marks
                    .iter()
                    .map(|&(r, o, l)| (out.rows + r, start + o, out.lines + l)),
            );
            out.rows += p.rows;
            out.lines += p.lines;
        }
        out
    }
}

/// Builds a [`CsvIndex`] from a file's bytes fed in order, in pieces of any size.
pub struct CsvScanner {
    index: CsvIndex,
    delimiter: u8,
    /// The first data line is a header still to be seen.
    header: bool,
    /// The current line so far, when it spans pieces.
    carry: Vec<u8>,
    line_start: u64,
    line: u64,
}

impl CsvScanner {
    /// A scanner of fields split by `delimiter`; `header`: the first data line names them.
    pub fn new(delimiter: u8, header: bool) -> CsvScanner {
        CsvScanner {
            index: CsvIndex::default(),
            delimiter,
            header,
            carry: Vec::new(),
            line_start: 0,
            line: 1,
        }
    }

    fn line_done(&mut self, text: &[u8], len: u64) {
        let Some(data) = row_data(text, self.delimiter) else {
            self.line_start += len;
            self.line += 1;
            return;
        };
        let data = data.trim_ascii();
        if std::mem::take(&mut self.header) {
            // The header: names, not a data row (quotes around a name are dropped).
            self.index.names = data
                .split(|&b| b == self.delimiter)
                .map(|f| {
                    let f = String::from_utf8_lossy(f.trim_ascii()).into_owned();
                    f.strip_prefix('"')
                        .and_then(|g| g.strip_suffix('"'))
                        .map(str::to_string)
                        .unwrap_or(f)
                })
                .collect();
            self.index.columns = self.index.names.len() as u64;
            self.index.header_line = self.line;
        } else {
            let ix = &mut self.index;
            if ix.rows.is_multiple_of(CSV_STRIDE) {
                ix.marks.push((ix.rows, self.line_start, self.line));
            }
            if ix.rows == 0 {
                ix.first_fields = memchr::memchr_iter(self.delimiter, data).count() as u64 + 1;
                if ix.names.is_empty() {
                    ix.columns = ix.first_fields;
                }
            }
            ix.rows += 1;
        }
        self.line_start += len;
        self.line += 1;
    }

    /// Scans the next bytes of the file (a line may span pieces).
    pub fn feed(&mut self, piece: &[u8]) {
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', piece) {
            if self.carry.is_empty() {
                self.line_done(&piece[from..nl], (nl + 1 - from) as u64);
            } else {
                let mut line = std::mem::take(&mut self.carry);
                line.extend_from_slice(&piece[from..nl]);
                let len = line.len() as u64 + 1;
                self.line_done(&line, len);
            }
            from = nl + 1;
        }
        self.carry.extend_from_slice(&piece[from..]);
    }

    /// The index of everything fed (a last line without a newline counts).
    pub fn finish(mut self) -> CsvIndex {
        if !self.carry.is_empty() {
            let line = std::mem::take(&mut self.carry);
            self.line_done(&line, line.len() as u64);
        }
        self.index.size = self.line_start;
        self.index.lines = self.line - 1;
        self.index
    }
}

/// Marks one piece's index can hold: one per [`CSV_STRIDE`] data rows, counting from its
/// first, and the lines of a piece start within [`CSV_PIECE`] bytes, a data row taking at
/// least two ("1\n"; the last of the file one).
pub const PIECE_MARKS: u64 = (CSV_PIECE / 2 + 1).div_ceil(CSV_STRIDE);

/// Numbers in one piece's row of a CSV count: start, end, rows, lines, columns, then
/// (row, offset, line) of each of up to [`PIECE_MARKS`] marks (zeros past its last).
pub const PIECE_ROW: u64 = 5 + 3 * PIECE_MARKS;

impl CsvIndex {
    /// This index of the piece `start..start + self.size` as one row of a count's output.
    pub fn to_piece_row(&self, start: u64) -> Vec<i64> {
        let mut row = vec![0i64; PIECE_ROW as usize];
        let head = [
            start,
            start + self.size,
            self.rows,
            self.lines,
            self.columns,
        ];
        for (r, v) in row.iter_mut().zip(head) {
            *r = v as i64;
        }
        for (k, m) in self.marks.iter().take(PIECE_MARKS as usize).enumerate() {
            row[5 + 3 * k..8 + 3 * k].copy_from_slice(&[m.0 as i64, m.1 as i64, m.2 as i64]);
        }
        row
    }

    /// A piece's start and index from its row (as [`CsvIndex::to_piece_row`] wrote it).
    pub fn from_piece_row(row: &[i64]) -> (u64, CsvIndex) {
        let at = |k: usize| row.get(k).copied().unwrap_or(0).max(0) as u64;
        let (start, rows) = (at(0), at(2));
        let marks = (0..rows.div_ceil(CSV_STRIDE).min(PIECE_MARKS) as usize)
            .map(|k| (at(5 + 3 * k), at(6 + 3 * k), at(7 + 3 * k)))
            .collect();
        let index = CsvIndex {
            size: at(1).saturating_sub(start),
            rows,
            columns: at(4),
            names: Vec::new(),
            header_line: 0,
            // A counted piece has no header: its columns are its first row's.
            first_fields: at(4),
            marks,
            lines: at(3),
        };
        (start, index)
    }
}

/// The start of the first line at or after `x` of a file whose bytes `at..` are `bytes`
/// (just after the first `\n` at or after `x - 1`; `x` = 0 is the file's start), if they
/// hold it.
pub fn line_start(bytes: &[u8], at: u64, x: u64) -> Option<u64> {
    if x == 0 {
        return Some(0);
    }
    let from = (x - 1).checked_sub(at)? as usize;
    memchr::memchr(b'\n', bytes.get(from..)?).map(|p| at + (from + p) as u64 + 1)
}

/// The offset of the first line of the file `key` (`size` bytes) of `store` that starts
/// at or after `from` (just after a newline at or after `from - 1`), or `size`: read 64 KiB
/// at a time from `from - 1`.
pub async fn next_line_start(
    store: &nums_layout::Store,
    key: &str,
    from: u64,
    size: u64,
) -> nums_layout::Result<u64> {
    if from == 0 {
        return Ok(0);
    }
    let mut at = from - 1;
    while at < size {
        let end = (at + (64 << 10)).min(size);
        let bytes = store.get_range(key, at..end).await?;
        if let Some(p) = memchr::memchr(b'\n', &bytes) {
            return Ok(at + p as u64 + 1);
        }
        at = end;
    }
    Ok(size)
}

/// The rows of pieces `i0..i1` of a file of `size` bytes cut every `piece` bytes at line
/// starts (piece `i` runs from the line start at or after `i * piece` to the next piece's
/// start; pieces that start at the same line are empty but the last): `bytes` are the
/// file from `at` = `i0 * piece - 1` (0 for the first piece) to the line start at or after
/// `i1 * piece`, or to its end. [`PieceCounter`] fed `bytes`.
pub fn count_pieces(
    bytes: &[u8],
    at: u64,
    size: u64,
    piece: u64,
    (i0, i1): (u64, u64),
    delimiter: u8,
) -> Vec<Vec<i64>> {
    let mut c = PieceCounter::new(size, piece, (i0, i1), delimiter);
    debug_assert_eq!(c.at(), at);
    c.feed(bytes);
    c.finish()
}

/// Counts pieces `i0..i1` of a file of `size` bytes cut every `piece` bytes at line starts
/// (as [`count_pieces`] defines them) from the file's bytes fed in order from
/// [`PieceCounter::at`], in chunks of any size, so that no more than a chunk (and a line
/// that spans chunks) is held: each piece's [`CsvScanner`] takes its bytes as they come,
/// and a piece ends at the first newline at or after the byte before the next piece's cut.
pub struct PieceCounter {
    size: u64,
    piece: u64,
    /// Pieces of the file.
    n: u64,
    /// The piece being counted, and the end of those to count.
    i: u64,
    i1: u64,
    delimiter: u8,
    /// The file's offset of the next byte fed.
    pos: u64,
    /// Where piece `i` starts, once its line start is seen.
    start: Option<u64>,
    scan: CsvScanner,
    rows: Vec<Vec<i64>>,
}

impl PieceCounter {
    /// A counter of pieces `i0..i1` of a file of `size` bytes cut every `piece` bytes.
    pub fn new(size: u64, piece: u64, (i0, i1): (u64, u64), delimiter: u8) -> PieceCounter {
        let at = (i0 * piece).saturating_sub(1);
        PieceCounter {
            size,
            piece,
            n: size.div_ceil(piece).max(1),
            i: i0,
            i1,
            delimiter,
            pos: at,
            // The file's first piece starts at its first byte; any other at the line
            // after the newline at or after `at`.
            start: (i0 == 0).then_some(0),
            scan: CsvScanner::new(delimiter, false),
            rows: Vec::with_capacity(i1.saturating_sub(i0) as usize),
        }
    }

    /// The file's offset of the first byte to feed, then of the next one.
    pub fn at(&self) -> u64 {
        self.pos
    }

    /// Whether every piece is counted (the bytes after are not needed).
    pub fn done(&self) -> bool {
        self.i >= self.i1
    }

    /// Piece `i` ends at `end` (the scanner has taken its bytes); the next starts there.
    fn close(&mut self, end: u64) {
        let s = self.start.unwrap_or(end);
        let scan = std::mem::replace(&mut self.scan, CsvScanner::new(self.delimiter, false));
        self.rows.push(scan.finish().to_piece_row(s));
        self.i += 1;
        self.start = Some(end);
    }

    /// After a newline just before `self.pos`, where piece `i` started: the pieces whose
    /// cut lies at or before that newline end there (empty but the first; the file's last
    /// piece runs to its end).
    fn close_passed(&mut self) {
        let nl = self.pos - 1;
        while !self.done() && self.i + 1 < self.n && (self.i + 1) * self.piece - 1 <= nl {
            self.close(self.pos);
        }
    }

    /// Takes the next bytes of the file; false once every piece is counted.
    pub fn feed(&mut self, mut b: &[u8]) -> bool {
        while !b.is_empty() && !self.done() {
            let Some(_) = self.start else {
                // Before the first piece: its start follows the first newline.
                match memchr::memchr(b'\n', b) {
                    Some(k) => {
                        self.pos += k as u64 + 1;
                        b = &b[k + 1..];
                        self.start = Some(self.pos);
                        self.close_passed();
                    }
                    None => {
                        self.pos += b.len() as u64;
                        b = &[];
                    }
                }
                continue;
            };
            if self.i + 1 >= self.n {
                // The file's last piece: to its end.
                self.scan.feed(b);
                self.pos += b.len() as u64;
                break;
            }
            // No newline before the byte ahead of the next cut ends the piece.
            let cut = (self.i + 1) * self.piece - 1;
            let before = (cut.saturating_sub(self.pos) as usize).min(b.len());
            self.scan.feed(&b[..before]);
            self.pos += before as u64;
            b = &b[before..];
            match memchr::memchr(b'\n', b) {
                Some(k) => {
                    self.scan.feed(&b[..=k]);
                    self.pos += k as u64 + 1;
                    b = &b[k + 1..];
                    self.close(self.pos);
                    self.close_passed();
                }
                None => {
                    self.scan.feed(b);
                    self.pos += b.len() as u64;
                    b = &[];
                }
            }
        }
        !self.done()
    }

    /// The rows of the pieces, one per piece (as [`CsvIndex::to_piece_row`] writes it),
    /// once the file is fed to its end or [`PieceCounter::done`]: a piece whose start or
    /// end no newline gave runs to the file's end.
    pub fn finish(mut self) -> Vec<Vec<i64>> {
        while !self.done() {
            self.close(self.size);
        }
        self.rows
    }
}

/// A line's text before its `#` comment, if it is a data row: `None` for a blank line or
/// only a comment. A delimiter makes a row of empty fields, whitespace delimiters too
/// (the index and the parser must count the same rows).
pub(crate) fn row_data(line: &[u8], delimiter: u8) -> Option<&[u8]> {
    let data = memchr::memchr(b'#', line).map_or(line, |p| &line[..p]);
    let blank = data.trim_ascii().is_empty() && memchr::memchr(delimiter, data).is_none();
    (!blank).then_some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_index_marks_data_rows_in_any_pieces() {
        let text = b"# c\r\n1,2\r\n\r\n 3,4 # x\n  # y\n5,6";
        for cut in 1..text.len() {
            let mut s = CsvScanner::new(b',', false);
            for piece in text.chunks(cut) {
                s.feed(piece);
            }
            let ix = s.finish();
            assert_eq!(
                (ix.size, ix.rows, ix.columns, ix.marks.clone(), ix.lines),
                (text.len() as u64, 3, 2, vec![(0, 5, 2)], 6)
            );
            assert_eq!(ix.span(1, 3), (5, text.len() as u64, 2, 1));
        }
    }

    /// The index counts as rows the lines the parser reads as rows
    /// (`crate::import`'s): with a whitespace delimiter, a line of only delimiters is a
    /// row of empty fields (an error when parsed, as in NumPy), not a blank line; else a
    /// block's rows, passed over by the parser, would be one off from the index's spans.
    #[test]
    fn csv_index_rows_are_the_parsers_rows() {
        for (delimiter, text) in [
            (b'\t', &b"1\t2\n\t\n3\t4\n \t \n5\t6\n"[..]),
            (b' ', &b"1 2\n   \n3 4\n"[..]),
            (b',', &b"1,2\n , \n3,4\n \n"[..]),
        ] {
            let mut s = CsvScanner::new(delimiter, false);
            s.feed(text);
            let ix = s.finish();
            let (rows, lines) = crate::import::count_rows(text, delimiter);
            assert_eq!(
                (ix.rows, ix.lines),
                (rows, lines),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    /// An index merged from pieces cut at line starts is the whole file's: the same rows,
    /// columns, names, lines, header line and first row's fields, and every span the same
    /// bytes.
    #[test]
    fn csv_index_merged_from_pieces_is_the_whole_files() {
        let mut text = b"a;b\r\n# note\n".to_vec();
        for i in 0..3000 {
            text.extend_from_slice(format!("{i};{}\r\n", i * 2).as_bytes());
            if i % 700 == 0 {
                text.extend_from_slice(b"\n  # gap\n");
            }
        }
        text.extend_from_slice(b"3000;6000"); // no final newline
        let whole = |bytes: &[u8], header| {
            let mut s = CsvScanner::new(b';', header);
            s.feed(bytes);
            s.finish()
        };
        let all = whole(&text, true);
        for cuts in [vec![5000], vec![1, 17, 9000, 20000], vec![13, 14, 15]] {
            // Cut at line starts only, as the probe does.
            let mut starts = vec![0usize];
            for c in cuts {
                let at = memchr::memchr(b'\n', &text[c.min(text.len() - 1)..]).map(|p| c + p + 1);
                if let Some(at) = at.filter(|&a| a < text.len() && a > *starts.last().unwrap()) {
                    starts.push(at);
                }
            }
            let mut pieces = Vec::new();
            for (k, &s0) in starts.iter().enumerate() {
                let s1 = starts.get(k + 1).copied().unwrap_or(text.len());
                pieces.push((s0 as u64, whole(&text[s0..s1], k == 0)));
            }
            let merged = CsvIndex::merge(pieces, text.len() as u64);
            assert_eq!(
                (merged.rows, merged.columns, &merged.names, merged.lines),
                (all.rows, all.columns, &all.names, all.lines)
            );
            // The header's line and the first row's fields, though a piece holds the
            // header alone (cut at 1).
            assert_eq!((merged.header_line, merged.first_fields), (1, 2));
            // A span's first row (by skipping from its start) and that row's line; the
            // last row of the span lies before its end.
            let nth_row = |start: u64, line: u64, skip: u64| -> (u64, Vec<u8>, u64) {
                let (mut at, mut line_no, mut seen) = (start, line, 0);
                for l in text[start as usize..].split(|&c| c == b'\n') {
                    let d = l.split(|&c| c == b'#').next().unwrap();
                    if !d.trim_ascii().is_empty() {
                        if seen == skip {
                            return (at, l.to_vec(), line_no);
                        }
                        seen += 1;
                    }
                    at += l.len() as u64 + 1;
                    line_no += 1;
                }
                panic!("no row {skip} from {start}");
            };
            for (r0, r1) in [(0, 1), (0, 3001), (699, 1500), (1024, 2048), (2999, 3001)] {
                let (s0, end, line, skip) = merged.span(r0, r1);
                let (_, row, at_line) = nth_row(s0, line, skip);
                let (w0, _, wline, wskip) = all.span(r0, r1);
                assert_eq!((row.clone(), at_line), {
                    let (_, r, l) = nth_row(w0, wline, wskip);
                    (r, l)
                });
                let (last, _, _) = nth_row(s0, line, skip + (r1 - r0) - 1);
                assert!(last < end && end <= text.len() as u64, "{r0}..{r1}");
            }
        }
    }

    /// Pieces counted as the functions count them (several per task, from the byte before
    /// the first) give the index the driver's scan of the same pieces gives.
    #[test]
    fn counted_pieces_merge_to_the_scanned_index() {
        let mut text = b"# head\n".to_vec();
        for i in 0..2000 {
            text.extend_from_slice(format!("{i},{}\r\n", i % 7).as_bytes());
            if i % 301 == 0 {
                text.extend_from_slice(b"\n # gap\n");
            }
            if i == 1500 {
                text.extend_from_slice(&[b'1'; 300]); // a line longer than a piece
                text.extend_from_slice(b",2\n");
            }
        }
        text.extend_from_slice(b"9,9");
        let size = text.len() as u64;
        for piece in [3u64, 17, 64, 100, 1000, 5000] {
            let n = size.div_ceil(piece);
            // The driver's way: cuts moved to line starts, repeats dropped.
            let mut starts = vec![0u64];
            for i in 1..n {
                let c = line_start(&text, 0, i * piece).unwrap_or(size);
                if c < size && c > *starts.last().unwrap() {
                    starts.push(c);
                }
            }
            let ends: Vec<u64> = starts.iter().skip(1).copied().chain([size]).collect();
            let scanned: Vec<(u64, CsvIndex)> = starts
                .iter()
                .zip(&ends)
                .map(|(&a, &b)| {
                    let mut s = CsvScanner::new(b',', false);
                    s.feed(&text[a as usize..b as usize]);
                    (a, s.finish())
                })
                .collect();
            let want = CsvIndex::merge(scanned, size);
            // The functions' way: tasks of 3 pieces, each reading from the byte before its
            // first piece to the line start after its last.
            let mut rows = Vec::new();
            for i0 in (0..n).step_by(3) {
                let i1 = (i0 + 3).min(n);
                let at = (i0 * piece).saturating_sub(1);
                let end = if i1 >= n {
                    size
                } else {
                    line_start(&text, 0, i1 * piece).unwrap_or(size)
                };
                let task = count_pieces(
                    &text[at as usize..end as usize],
                    at,
                    size,
                    piece,
                    (i0, i1),
                    b',',
                );
                // The same rows from the file streamed in chunks of any size from `at` to
                // its end (the counter stops wanting bytes after its last piece).
                for chunk in [1, 2, 7, 63, 64, 65, 1000, 1 << 20] {
                    let mut c = PieceCounter::new(size, piece, (i0, i1), b',');
                    assert_eq!(c.at(), at);
                    let mut fed = at as usize;
                    for b in text[at as usize..].chunks(chunk) {
                        fed += b.len();
                        if !c.feed(b) {
                            break;
                        }
                    }
                    assert!(fed as u64 <= end + chunk as u64, "read past the last piece");
                    assert_eq!(c.finish(), task, "piece {piece}, chunk {chunk}, task {i0}");
                }
                rows.extend(task);
            }
            let got = CsvIndex::merge(
                rows.iter().map(|r| CsvIndex::from_piece_row(r)).collect(),
                size,
            );
            assert_eq!(got, want, "piece {piece}");
        }
    }
}
