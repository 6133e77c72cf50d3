//! GFM tables: rows kept until the table ends (the delimiter row follows the first row,
//! whose width is known only then), or written inline where no table can be.

use super::{Inline, Leaf, Writer};
use crate::escape::table_cell;

#[derive(Debug, Default)]
pub(super) struct Table {
    pub(super) rows: Vec<Vec<String>>,
    /// Written inline into the enclosing cell, heading or term instead.
    pub(super) flat: bool,
}

impl Writer {
    /// Opens a table; inside a cell, heading or term it is written inline.
    pub fn open_table(&mut self) {
        let flat = self.inline_only > 0 || self.pre.is_some();
        if !flat {
            self.end_leaf();
        } else {
            self.text(" ");
        }
        self.tables.push(Table {
            rows: Vec::new(),
            flat,
        });
    }

    /// Starts a row of the innermost table.
    pub fn open_row(&mut self) {
        match self.tables.last_mut() {
            Some(table) if !table.flat => table.rows.push(Vec::new()),
            _ => self.text(" "),
        }
    }

    /// Opens a cell of the current row: its text is collected apart.
    pub fn open_cell(&mut self) {
        if self.tables.last().is_some_and(|t| t.flat) || self.tables.is_empty() {
            self.text(" ");
            return;
        }
        self.end_leaf();
        self.inline.push(Inline::default());
        self.inline_only += 1;
        self.leaf = Some(Leaf::Text);
    }

    /// Closes the open cell.
    pub fn close_cell(&mut self) {
        if self.tables.last().is_some_and(|t| t.flat) || self.tables.is_empty() {
            self.text(" ");
            return;
        }
        let text = self.take_inline();
        self.inline.pop();
        self.inline_only -= 1;
        self.leaf = None;
        let cell = if text.contains('\n') {
            table_cell(text.replace("\\\n", " ").trim())
        } else {
            table_cell(text.trim())
        };
        if let Some(table) = self.tables.last_mut() {
            match table.rows.last_mut() {
                Some(row) => row.push(cell),
                None => table.rows.push(vec![cell]),
            }
        }
    }

    /// Ends the innermost table and writes it.
    pub fn end_table(&mut self) {
        let Some(table) = self.tables.pop() else {
            return;
        };
        if table.flat {
            self.text(" ");
            return;
        }
        self.end_leaf();
        let rows: Vec<Vec<String>> = table.rows.into_iter().filter(|r| !r.is_empty()).collect();
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if width == 0 {
            return;
        }
        let mut out = String::new();
        for (i, row) in rows.iter().enumerate() {
            out.push('|');
            for cell in row {
                out.push(' ');
                out.push_str(cell);
                out.push_str(" |");
            }
            if i == 0 {
                // Only the header needs the full width: GFM fills shorter rows.
                out.push_str(&"  |".repeat(width - row.len()));
                out.push('\n');
                out.push('|');
                out.push_str(&" --- |".repeat(width));
            }
            out.push('\n');
        }
        out.pop();
        self.write_block(&out, true);
    }
}
