//! The builder as the tokenizer's [`Sink`]: each token, to the rules of its phase.

use super::*;
use crate::tokenizer::Sink;

impl Sink for Builder<'_> {
    fn start_tag(&mut self, tag: &Tag<'_>) -> TextMode {
        self.tick();
        if self.phase == Phase::BeforeBody {
            if let Some(mode) = self.head_start_tag(tag) {
                return mode;
            }
            self.phase = Phase::Body;
        }
        self.body_start_tag(tag)
    }

    fn end_tag(&mut self, name: &str) {
        self.tick();
        if self.phase == Phase::BeforeBody {
            self.in_head_raw = false;
            match name {
                "title" => self.in_title = false,
                "head" | "body" | "html" | "br" => self.phase = Phase::Body,
                "template" => self.pop_until(|n, _| n == "template"),
                _ => {}
            }
            if name != "br" {
                return;
            }
        }
        if let Some(fmt) = formatting(name) {
            if let Some(i) = self.last_formatting(fmt) {
                self.remove_formatting(i);
            }
            return;
        }
        match name {
            "body" | "html" | "head" => {}
            "br" => {
                if self.writing() {
                    self.writer.line_break();
                }
            }
            "p" => self.close_p(),
            "li" => {
                if self.has_in_scope(|_, el| el == El::Item, &["ol", "ul"]) {
                    self.pop_until(|_, el| el == El::Item);
                }
            }
            "dt" | "dd" => {
                if self.has_in_scope(|n, _| n == name, &[]) {
                    self.pop_until(|n, _| n == name);
                }
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                if self.has_in_scope(|_, el| matches!(el, El::Heading(_)), &[]) {
                    self.pop_until(|_, el| matches!(el, El::Heading(_)));
                }
            }
            "table" | "tbody" | "thead" | "tfoot" | "tr" | "td" | "th" | "caption" => {
                let table_scope = |this: &Self| {
                    for open in this.stack.iter().rev() {
                        let n = this.name_of(open);
                        if n == name || (name == "td" && n == "th") || (name == "th" && n == "td") {
                            return true;
                        }
                        if matches!(n, "table" | "html" | "template") {
                            return false;
                        }
                    }
                    false
                };
                if table_scope(self) {
                    let cell = matches!(name, "td" | "th");
                    self.pop_until(|n, _| n == name || (cell && matches!(n, "td" | "th")));
                }
            }
            _ if closes_p(name) || matches!(name, "applet" | "marquee" | "object" | "button") => {
                if self.has_in_scope(|n, _| n == name, &[]) {
                    self.pop_until(|n, _| n == name);
                }
            }
            _ => {
                // Any other end tag: closes the element if nothing special is in between.
                for i in (0..self.stack.len()).rev() {
                    let open = &self.stack[i];
                    let open_name = self.name_of(open);
                    if open_name == name {
                        while self.stack.len() > i {
                            self.pop();
                        }
                        break;
                    }
                    if is_special(open_name) && !open.foreign {
                        break;
                    }
                }
            }
        }
    }

    fn text(&mut self, text: &str, raw: bool) {
        self.tick();
        if self.in_head_raw {
            return;
        }
        if self.in_title {
            let title = self.info.title.get_or_insert_with(String::new);
            title.push_str(&decode_text(text));
            return;
        }
        if self.phase == Phase::BeforeBody {
            if text.bytes().all(|b| b.is_ascii_whitespace()) {
                return;
            }
            self.phase = Phase::Body;
        }
        if !self.writing() {
            return;
        }
        if matches!(
            self.stack.last().map(|o| o.el),
            Some(El::Table | El::TableSection | El::Row)
        ) && text.bytes().all(|b| b.is_ascii_whitespace())
        {
            return;
        }
        if raw {
            self.writer.text(text);
        } else {
            self.writer.text(&decode_text(text));
        }
    }

    fn stopped(&self) -> bool {
        self.error.is_some()
    }
}
