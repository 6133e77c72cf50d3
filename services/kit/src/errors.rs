//! Errors written for people: the whole chain of causes, since the outermost message of
//! a library often says least.

/// An error and every cause under it, `outer: inner: innermost`, each cause left out
/// when the text so far says it already. hyper's own message ("client error
/// (Connect)") says nothing of an untrusted certificate or a refused connection; its
/// causes do.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        inner: Option<Box<Layer>>,
    }

    fn layer(text: &'static str, inner: Option<Layer>) -> Layer {
        Layer {
            text,
            inner: inner.map(Box::new),
        }
    }

    #[test]
    fn every_cause_is_said_once() {
        let refused = layer("connection refused", None);
        let connect = layer("tcp connect error", Some(refused));
        let outer = layer("client error (Connect)", Some(connect));
        assert_eq!(
            with_causes(&outer),
            "client error (Connect): tcp connect error: connection refused"
        );
        let repeating = layer("a.pem: no such file", Some(layer("no such file", None)));
        assert_eq!(with_causes(&repeating), "a.pem: no such file");
        assert_eq!(with_causes(&layer("alone", None)), "alone");
    }
}
