//! Diagnostics as the checker produces them, located by token spans.
//!
//! [`crate::Diagnostics`] (for files) and `syn::Error` (for the proc-macro) are made from these at
//! the API boundary.

use crate::span::{Loc, Sp};

/// One error: a message, the main location with its label, and optional extra labels, notes, help.
#[derive(Debug, Clone)]
pub(crate) struct Diag {
    /// The headline.
    pub message: String,
    /// Where it points.
    pub primary: Loc,
    /// The text under the main location.
    pub label: String,
    /// Other locations worth showing, with their labels.
    pub secondary: Vec<(Loc, String)>,
    /// Extra facts.
    pub notes: Vec<String>,
    /// A suggestion.
    pub help: Option<String>,
}

impl Diag {
    /// An error at a range of tokens.
    pub fn new(message: impl Into<String>, at: Sp, label: impl Into<String>) -> Diag {
        Diag::at_loc(message, Loc::Tokens(at), label)
    }

    /// An error at any location.
    pub fn at_loc(message: impl Into<String>, primary: Loc, label: impl Into<String>) -> Diag {
        Diag {
            message: message.into(),
            primary,
            label: label.into(),
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Adds a secondary label.
    pub fn with_label(mut self, at: Sp, text: impl Into<String>) -> Diag {
        self.secondary.push((Loc::Tokens(at), text.into()));
        self
    }

    /// Adds a secondary label at any location.
    pub fn with_loc_label(mut self, at: Loc, text: impl Into<String>) -> Diag {
        self.secondary.push((at, text.into()));
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diag {
        self.notes.push(note.into());
        self
    }

    /// Sets the help text.
    pub fn with_help(mut self, help: impl Into<String>) -> Diag {
        self.help = Some(help.into());
        self
    }

    /// Sets the help text if there is one.
    pub fn with_help_opt(mut self, help: Option<String>) -> Diag {
        if help.is_some() {
            self.help = help;
        }
        self
    }

    /// The diagnostics of a syn parse error (one per message it carries).
    pub fn from_syn(err: syn::Error) -> Vec<Diag> {
        err.into_iter().map(|e| Diag::new(e.to_string(), Sp::one(e.span()), "")).collect()
    }
}
