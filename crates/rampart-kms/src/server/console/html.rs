//! A tiny HTML builder for the console's pages. Markup only comes from
//! `&'static str` (text written in this crate); every other value goes
//! through [`Html::text`] or an attribute helper, which escape it, so no
//! value from the store, a request or a client certificate can become
//! markup.

use std::fmt::Write as _;

/// Escapes text for an HTML element's content or a quoted attribute.
#[must_use]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a query parameter value (unreserved characters kept).
#[must_use]
pub fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query string from pairs, empty values left out.
#[must_use]
pub fn query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// An HTML document being written.
#[derive(Debug, Default)]
pub struct Html {
    out: String,
}

impl Html {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Markup written in this crate.
    pub fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Escaped text.
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.out.push_str(&escape(text));
        self
    }

    /// ` name="value"`, the value escaped.
    pub fn attr(&mut self, name: &'static str, value: &str) -> &mut Self {
        self.out.push(' ');
        self.out.push_str(name);
        self.out.push_str("=\"");
        self.out.push_str(&escape(value));
        self.out.push('"');
        self
    }

    /// `<a href="HREF">TEXT</a>`.
    pub fn link(&mut self, href: &str, text: &str) -> &mut Self {
        self.raw("<a").attr("href", href).raw(">").text(text).raw("</a>")
    }

    /// `<TAG>TEXT</TAG>` for a tag without attributes.
    pub fn el(&mut self, tag: &'static str, text: &str) -> &mut Self {
        self.raw("<").raw(tag).raw(">").text(text).raw("</").raw(tag).raw(">")
    }

    /// A table cell holding text.
    pub fn td(&mut self, text: &str) -> &mut Self {
        self.el("td", text)
    }

    /// A hidden form field.
    pub fn hidden(&mut self, name: &str, value: &str) -> &mut Self {
        self.raw("<input type=\"hidden\"").attr("name", name).attr("value", value).raw(">")
    }

    /// A labelled text input.
    pub fn input(
        &mut self,
        label: &str,
        name: &str,
        value: &str,
        extra: &'static str,
    ) -> &mut Self {
        let id = format!("f-{name}");
        self.raw("<span class=\"field\"><label")
            .attr("for", &id)
            .raw(">")
            .text(label)
            .raw("</label> ");
        self.raw("<input").attr("id", &id).attr("name", name).attr("value", value);
        self.raw(" ").raw(extra).raw("></span>")
    }

    /// A labelled select, `value` selected.
    pub fn select(
        &mut self,
        label: &str,
        name: &str,
        options: &[(&str, &str)],
        value: &str,
    ) -> &mut Self {
        let id = format!("f-{name}");
        self.raw("<span class=\"field\"><label")
            .attr("for", &id)
            .raw(">")
            .text(label)
            .raw("</label> ");
        self.raw("<select").attr("id", &id).attr("name", name).raw(">");
        for (v, text) in options {
            self.raw("<option").attr("value", v);
            if *v == value {
                self.raw(" selected");
            }
            self.raw(">").text(text).raw("</option>");
        }
        self.raw("</select></span>")
    }

    #[must_use]
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_never_become_markup() {
        let mut h = Html::new();
        h.raw("<p").attr("title", "\"><script>").raw(">").text("<b>&'x'</b>").raw("</p>");
        h.link("/ui/keys?a=1&b=\"", "k<");
        assert_eq!(
            h.finish(),
            "<p title=\"&quot;&gt;&lt;script&gt;\">&lt;b&gt;&amp;&#39;x&#39;&lt;/b&gt;</p>\
             <a href=\"/ui/keys?a=1&amp;b=&quot;\">k&lt;</a>"
        );
        assert_eq!(url_encode("label:a=b c/é"), "label%3Aa%3Db%20c%2F%C3%A9");
        assert_eq!(query(&[("a", "x y"), ("b", ""), ("c", "1")]), "a=x%20y&c=1");
    }
}
